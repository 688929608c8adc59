"""Words of the graph-break rule (rules/graph_breaks.py)."""

from __future__ import annotations

from gpu_notebook.rules.graph_breaks import GraphBreak
from gpu_notebook.words.common import Words, worder, words


@worder(GraphBreak)
def graph_break(s: GraphBreak) -> Words:
    more = f" ({s.count} such calls in it)" if s.count > 1 else ""
    return words(
        "The compiled model breaks its graph on every call",
        [
            f"line {s.line}: `{s.text}` in {s.model}.forward hands a tensor's value to Python: "
            f"torch.compile ends the graph there and runs it eagerly, every call{more}",
            "not timed: what joining the graphs would save is not measured here",
        ],
        "Keep the value on the tensor side (torch.where / torch.clamp instead of an if on "
        ".item(), no print in forward), or check it outside the model every N steps; "
        "torch._dynamo.explain(model)(x) or TORCH_LOGS=graph_breaks lists every break.",
        "PyTorch torch.compile troubleshooting: graph breaks",
    )
