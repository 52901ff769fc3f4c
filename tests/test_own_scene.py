"""A scene clashx does not ship (examples/own_scene.py: a paddle strikes a puck) through the whole pipeline.

The README's commands, at a small size: generate, pretrain, identify, fine-tune,
evaluate and the hybrid rollout, on the command line; then the hybrid against
full-contact MuJoCo C on launches the model never saw, MJX's hybrid against the
C fallback (the same rule), and the hybrid's forward-mode derivative against
central differences.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from clashx.hybrid import full_rollouts_c, rollouts, rollouts_c
from clashx.scenes import load_scene
from clashx.surrogate._pair import load_pair_surrogate
from clashx.workflows._cli import main

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "own_scene.py")
SPEC = f"{EXAMPLE}:PaddlePuck"
N_TRAIN = 6000  # simulated impacts (about 8 s on 2 cores)
TRUE = {"mu": 0.4, "timeconst": 0.005, "dampratio": 0.7}  # the stand-in lab's parameters
# The hybrid's puck comes to rest within this fraction of its travel of full-contact C's (median over
# 48 held-out launches); 6000 impacts and 40 epochs reach ~4 %, 8000 and 60 epochs ~3 %.
HYBRID_POSITION_TOL = 0.08
HYBRID_POSITION_P90_TOL = 0.3
RULE_TOL = 1e-4  # m: MJX's hybrid against the C fallback's (the same rule; engines differ by float32 rounding)
VALIDATION_TOL = 0.12  # median relative error of the post-window velocities on held-out simulated impacts
IDENTIFY_SIGMAS = 3.0  # the truth lies within this many of the identification's own σ of what it found
DERIVATIVE_RTOL = 0.05


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The README's commands on the example scene; returns the folder."""
    d = tmp_path_factory.mktemp("own_scene")
    (d / "true.json").write_text(json.dumps({"params": TRUE}))
    run = lambda *args: main([*args, "--scene", SPEC])  # noqa: E731
    assert run("generate", "--n", str(N_TRAIN), "--out", str(d / "sim.npz")) == 0
    assert (
        run("generate", "--n", "200", "--seed", "7", "--params", str(d / "true.json"), "--out", str(d / "lab.npz")) == 0
    )
    assert run("pretrain", "--data", str(d / "sim.npz"), "--out", str(d / "run"), "--epochs", "40", "--batch-size", "128",
               "--width", "128", "--depth", "3", "--lr", "3e-3", "--json", str(d / "pretrain.json")) == 0  # fmt: skip
    assert run("identify", "--model", str(d / "run"), "--real", str(d / "lab.npz"), "--select", "0:10",
               "--out", str(d / "params.json")) == 0  # fmt: skip
    assert run("finetune", "--model", str(d / "run"), "--real", str(d / "lab.npz"), "--select", "0:10",
               "--params", str(d / "params.json"), "--out", str(d / "tuned")) == 0  # fmt: skip
    assert run("evaluate", "--model", str(d / "tuned"), "--real", str(d / "lab.npz"), "--select", "10:200",
               "--params", str(d / "params.json"), "--json", str(d / "eval.json")) == 0  # fmt: skip
    assert run("rollout", "--model", str(d / "tuned"), "--n", "48", "--seed", "3", "--json", str(d / "roll.json")) == 0
    return d


def test_pipeline_scores(pipeline):
    """Each step's numbers against their references: simulation (validation, hybrid vs full C) and the truth."""
    val = json.loads((pipeline / "pretrain.json").read_text())["validation"]
    assert val["median_rel_err"] < VALIDATION_TOL < val["median_rel_err_no_impact"]
    ident = json.loads((pipeline / "params.json").read_text())
    for name, true in TRUE.items():  # ten impacts pin the contact's stiffness down; μ they leave loose (σ ~ 0.25)
        assert abs(ident["params"][name] - true) <= IDENTIFY_SIGMAS * ident["std"][name], ident
    ev = json.loads((pipeline / "eval.json").read_text())
    assert ev["n"] == 190 and ev["median_rel_err"] < 2 * VALIDATION_TOL
    roll = json.loads((pipeline / "roll.json").read_text())
    puck = roll["final_position"]["puck"]
    assert puck["median_rel_err"] < HYBRID_POSITION_TOL and puck["p90_rel_err"] < HYBRID_POSITION_P90_TOL, roll
    assert roll["steps_run"] < roll["steps_max"]  # every world came to rest before the time limit


def test_hybrid_engines_agree_and_differentiate(pipeline):
    """MJX's hybrid is the C fallback's rule: same impacts, same end; and its jacfwd matches central differences."""
    scene = load_scene(SPEC)
    model = load_pair_surrogate(pipeline / "run", scene)
    launch, params = scene.sample_inputs(8, key=jax.random.PRNGKey(11))
    nq = scene.c_model().nq
    q0, v0 = launch[:, :nq], launch[:, nq:]
    info = rollouts_c(scene, model, params, q0, v0, 600, until_rest=False)
    q_c = info.qpos
    states = rollouts(scene, model, params, q0, v0, 600)
    np.testing.assert_array_equal(np.asarray(states.rule.impacts), info.impacts)
    np.testing.assert_allclose(np.asarray(states.data.qpos), q_c, atol=RULE_TOL)
    q_full, _ = full_rollouts_c(scene, params, q0, v0, 600)
    assert np.all(info.impacts >= 1) and np.all(np.linalg.norm(q_full[:, 2:4] - q0[:, 2:4], axis=1) > 0.02)

    def puck_end(p):  # the puck's position 0.25 s after launch, world 0, as a function of its parameters
        s = rollouts(scene, model, p[None], q0[:1], v0[:1], 250)
        return s.data.qpos[0, 2:4]

    p0 = jnp.asarray(params[0], jnp.float32)
    jac = np.asarray(jax.jit(jax.jacfwd(puck_end))(p0))
    h = 0.01 * np.asarray(p0)  # 1 % of each value: the time constant enters as 1/τ²
    f = jax.jit(puck_end)
    fd = np.stack(
        [(np.asarray(f(p0.at[j].add(h[j]))) - np.asarray(f(p0.at[j].add(-h[j])))) / (2 * h[j]) for j in range(3)], 1
    )
    scale = np.abs(fd).max()
    np.testing.assert_allclose(jac, fd, atol=DERIVATIVE_RTOL * scale)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("PaddlePuck", "expected MODULE:CLASS"),
        ("no/such/file.py:PaddlePuck", "no file no/such/file.py"),
        ("no_such_module_xyz:PaddlePuck", "cannot import 'no_such_module_xyz'"),
        (f"{EXAMPLE}:Nope", "no PairScene subclass named 'Nope'"),
        ("json:JSONDecoder", "no PairScene subclass named 'JSONDecoder'"),
    ],
)
def test_scene_spec_errors(spec, message):
    """A bad --scene names what is wrong and how to give it; nothing runs."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_scene(spec)


def test_a_scenes_families_side_by_side(pipeline, capsys):
    """A PARAMS.json holding the rigid law beside the surrogate: `evaluate` scores each family and their average, the
    law's row equal to `pair_law_scores` on the same impacts; `rollout --family rigid` without one is refused."""
    import clashx
    from clashx.learn import load_pair_events, pair_law_scores
    from clashx.scenes import pair_law

    params = json.loads((pipeline / "params.json").read_text())
    law = {"e_n": 0.4, "e_t": 0.1, "mu": 0.5}
    (pipeline / "both.json").write_text(json.dumps(params | {"families": {"rigid": {"params": law}}}))
    run = lambda *args: main([*args, "--scene", SPEC])  # noqa: E731
    assert run("evaluate", "--model", str(pipeline / "tuned"), "--real", str(pipeline / "lab.npz"), "--select",
               "10:200", "--params", str(pipeline / "both.json"), "--json", str(pipeline / "both_eval.json")) == 0  # fmt: skip
    ev = json.loads((pipeline / "both_eval.json").read_text())
    assert set(ev["families"]) == {"mujoco", "rigid", "both"}
    assert ev["families"]["mujoco"]["alpha_0.1"] == ev["alpha_accuracy"]
    scene = clashx.load_scene(SPEC)
    data = load_pair_events(str(pipeline / "lab.npz"), scene, select=lambda n: np.arange(10, 200))
    want = pair_law_scores(pair_law(scene), data["pre"], data["post"], np.array(list(law.values())))
    assert ev["families"]["rigid"]["median_rel_err"] == pytest.approx(want.median_rel_err, rel=1e-5)
    assert run("rollout", "--model", str(pipeline / "tuned"), "--params", str(pipeline / "params.json"),
               "--family", "rigid", "--n", "4") == 2  # fmt: skip
    assert "--family rigid needs --params" in capsys.readouterr().err
