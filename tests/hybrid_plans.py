"""A hand-written hybrid plan for tests: coefficient encoding at n = 8192 with two 60-bit primes
and a 37-bit t (room for 40 bits of noise flooding), grouped convolutions packed (Gazelle, with a
special prime for the rotations), so tests need no cost calibration."""

from lycaon.plan import linear_layers


def coefficient_plan(graph) -> dict:
    layers = []
    for layer in linear_layers(graph):
        fc = layer["shape"]["k"] == 1 and layer["shape"]["h"] == 1
        if layer["shape"].get("groups", 1) > 1:  # coefficient encoding takes no groups: the packed convolution, with rotations
            layers.append({"name": layer["name"], "shape": layer["shape"], "algorithm": "gazelle-IA",
                           "params": {"n": 16384, "q_bits": [60, 60, 60], "p_bits": [60], "t_bits": 37, "digits": 3}})
            continue
        layers.append({"name": layer["name"], "shape": layer["shape"], "algorithm": "cheetah-matvec" if fc else "cheetah",
                       "params": {"n": 8192, "q_bits": [60, 60], "p_bits": [], "t_bits": 37, "digits": 1}})
    return {"layers": layers}
