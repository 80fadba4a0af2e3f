"""Draw the picture of an instance on each non-LUCA world's page
(``docs/worlds/pictures/<world>.png``), each with its world's own figure
function. Not a MkDocs hook: the pictures are committed, so the site builds
in seconds without running a world; rebuild them after a change to a world or
its figure with

    python docs/hooks/world_pictures.py            # every world
    python docs/hooks/world_pictures.py dag        # some

Each picture is one session on an example (unsealed) seed, played by a
baseline through the world's own session (the flat codec or the tool
session), and drawn from what the agent saw and did: no hidden truth is read
for a picture. LUCA's picture is the quick-start notebook's drawing of an
organism's network, copied from its stored output.
"""

from __future__ import annotations

import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parents[1] / "worlds" / "pictures"
SIZE_LIMIT = 150_000  # bytes: a page should load fast


def graph(world: str, path: pathlib.Path) -> None:
    """A ``systematic`` session of ``dag`` (6 molecules, 3 states) or
    ``relational`` (6 houses) on seed 0, through the flat codec."""
    import jax

    from luca_gym.worlds.graphs.baselines import systematic_policy
    from luca_gym.worlds.graphs.config import DagConfig, RelationalConfig
    from luca_gym.worlds.graphs.flat import GraphFlat
    from luca_gym.worlds.graphs.report import figure_session

    config = DagConfig(n_nodes=6, n_states=3) if world == "dag" else RelationalConfig(n_houses=6)
    codec = GraphFlat(config)
    policy = systematic_policy(codec)
    state, vector, mask = jax.vmap(codec.open)(codec.instances([0]))
    key = jax.random.PRNGKey(0)
    for _ in range(2 * config.n + 1):
        state, vector, mask, _, terminated, *_ = jax.vmap(codec.step)(state, policy(None, key, vector, mask))
        if bool(terminated[0]):
            break
    figure_session(jax.tree_util.tree_map(lambda x: x[0], state), config, str(path), agent="systematic")


def equation(path: pathlib.Path) -> None:
    """``systematic`` and ``random`` on one medium instance (3 variables and a
    distractor, seed 0), through the tool session."""
    from luca_gym.llm.loop import run_agent
    from luca_gym.worlds.equation.baselines import BASELINES
    from luca_gym.worlds.equation.report import figure_sessions, session_of
    from luca_gym.worlds.equation.tools import EquationToolSession

    settings = {"complexity": "medium", "n_variables": 3, "n_distractors": 1}
    sessions = {agent: session_of(run_agent(BASELINES[agent](), EquationToolSession(0, **settings))["messages"])
                for agent in ("systematic", "random")}
    figure_sessions(sessions, str(path), title="equation, medium, 3 variables + 1 distractor (seed 0)")


def tracking(path: pathlib.Path) -> None:
    """The ``forgetful`` baseline's submission on a 12-step trajectory of 5
    nodes (seed 0), through the tool session."""
    import numpy as np

    from luca_gym.worlds.tracking.baselines import BASELINES
    from luca_gym.worlds.tracking.report import figure_session
    from luca_gym.worlds.tracking.tools import TrackingToolSession

    session = TrackingToolSession(0, length=12, n_nodes=5)
    x = np.asarray(session.observations())
    guess = BASELINES["forgetful"]().answer(x)
    answer = session.call("submit_changes", {"changes": guess.astype(int).tolist()})
    assert answer.get("ended"), answer
    figure_session(x, guess, str(path), agent="forgetful")


def biobank(path: pathlib.Path) -> None:
    """The released cine MRI of four imaged participants of the small world of
    seed 0, read from the release as an analyst's code reads it (the data
    dictionary's loading line), beside each one's clinic-reported LVEF."""
    import matplotlib.pyplot as plt
    import numpy as np

    from luca_gym.worlds.biobank.world import make_world

    release = make_world(0).release
    cine, imaging = release.tables["cine_mri"], release.tables["imaging"]
    frames = np.frombuffer(b"".join(cine["frames"]), np.uint8).reshape(len(cine["frames"]), 8, 32, 32)
    lvef = dict(zip(imaging["participant_id"], imaging["lvef_pct"]))
    picked = np.linspace(0, len(frames) - 1, 4).astype(int)
    fig, axes = plt.subplots(len(picked), 8, figsize=(6.4, 3.6))
    for row, i in zip(axes, picked):
        pid = cine["participant_id"][i]
        for t, ax in enumerate(row):
            ax.imshow(frames[i, t], cmap="gray", vmin=0, vmax=255)
            ax.set_xticks([]), ax.set_yticks([])
            if t == 0:
                reported = lvef[pid]
                ax.set_ylabel(f"{pid}\nLVEF {reported:.0f}%" if reported > 0 else f"{pid}\nLVEF -", fontsize=7)
    for t, ax in enumerate(axes[0]):
        ax.set_title(f"frame {t}", fontsize=7)
    fig.suptitle("biobank, small world, seed 0: released cine MRI (8 frames, 32 x 32, end-diastole first)", fontsize=9)
    fig.savefig(str(path), dpi=90, bbox_inches="tight")  # grey noise compresses badly: a smaller picture
    plt.close(fig)


def luca(path: pathlib.Path) -> None:
    """The quick-start notebook's picture of an organism's true network (cell
    3's stored output, drawn by ``viewer.draw_network``), to 128 colours so
    it fits the size limit: the page shows what the notebook shows, and the
    repository has it where the page is read (the notebook's rendered page
    exists only on the site)."""
    import base64
    import io

    import nbformat
    from PIL import Image

    notebook = nbformat.read(ROOT / "notebooks" / "quickstart.ipynb", as_version=4)
    png = next(o["data"]["image/png"] for o in notebook.cells[NETWORK_CELL].outputs if "image/png" in o.get("data", {}))
    picture = Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB")
    picture.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, "PNG", optimize=True)


ROOT = OUT.parents[2]
NETWORK_CELL = 3  # the quick-start notebook's cell that draws the network

PICTURES = {
    "luca": luca,
    "dag": lambda path: graph("dag", path),
    "relational": lambda path: graph("relational", path),
    "equation": equation,
    "tracking": tracking,
    "biobank": biobank,
}


def main(names) -> None:
    """Draw the pictures of ``names`` (every world's when empty)."""
    unknown = sorted(set(names) - set(PICTURES))
    if unknown:
        raise SystemExit(f"worlds: {', '.join(unknown)} not allowed; allowed {', '.join(PICTURES)}")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or PICTURES:
        path = OUT / f"{name}.png"
        PICTURES[name](path)
        size = path.stat().st_size
        print(f"{path.relative_to(OUT.parents[1])}: {size / 1000:.0f} kB")
        if size > SIZE_LIMIT:
            raise SystemExit(f"{path}: {size} bytes, over the {SIZE_LIMIT} a page picture may take; draw it smaller")


if __name__ == "__main__":
    main(sys.argv[1:])
