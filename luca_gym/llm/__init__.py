"""Language-model front ends: the agent loop over a world's tool session, the providers (OpenAI-compatible,
Anthropic, local servers), the scripted mock provider and the recording of real responses."""
