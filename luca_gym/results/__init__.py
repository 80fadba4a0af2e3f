"""What a sweep's results become: tables, figures, the report and its HTML page, paired tests, audits, process
measures and transcripts. Every world's report is built on these; none names a world."""
