"""The notebook bridge: records, TS/Python parity, version parity, packaging, and the comm protocol
against a real kernel (this test plays the frontend's part)."""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gpu_notebook
from gpu_notebook import bridge
from gpu_notebook.bridge import BridgeError, InsertCellReply, InsertCellRequest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_JSON = ROOT / "labextension" / "package.json"
FIX = "# gpucheck fix: use 4 DataLoader workers\nloader = DataLoader(ds, num_workers=4)\n"


# ------------------------------------------------------------------------------------ records


def test_request_and_reply_round_trip_through_json() -> None:
    request = InsertCellRequest(request_id="r1", cell_id="a-b_9", source=FIX, title="workers")
    assert InsertCellRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    unknown = InsertCellRequest(request_id="r2", cell_id=None, source="", title="")
    assert InsertCellRequest.from_dict(json.loads(json.dumps(unknown.to_dict()))) == unknown
    for status in ("inserted", "duplicate", "error"):
        reply = InsertCellReply(request_id="r1", status=status, message="m")  # type: ignore[arg-type]
        assert InsertCellReply.from_dict(json.loads(json.dumps(reply.to_dict()))) == reply


def test_records_are_frozen() -> None:
    request = InsertCellRequest(request_id="r1", cell_id=None, source=FIX, title="t")
    with pytest.raises(AttributeError):
        request.source = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        ({"request_id": "r", "cell_id": None, "source": "s"}, "missing required field `title`"),
        (
            {"request_id": "r", "cell_id": None, "source": "s", "title": "t", "x": 1},
            "unknown field `x`",
        ),
        ({"request_id": "r", "cell_id": 3, "source": "s", "title": "t"}, r"\$\.cell_id"),
        ({"request_id": "", "cell_id": None, "source": "s", "title": "t"}, r"\$\.request_id"),
        ({"request_id": "r')", "cell_id": None, "source": "s", "title": "t"}, r"\$\.request_id"),
        ({"request_id": "r", "cell_id": "no spaces", "source": "s", "title": "t"}, r"\$\.cell_id"),
        ({"request_id": "r", "cell_id": None, "source": b"s", "title": "t"}, r"\$\.source"),
        (
            {"request_id": "r", "cell_id": None, "source": "s" * 500_001, "title": "t"},
            r"length <= 500000 - at `\$\.source`",
        ),
        ("not an object", "Expected `object`"),
    ],
)
def test_malformed_requests_are_rejected_with_the_field_named(
    data: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(BridgeError, match=complaint):
        InsertCellRequest.from_dict(data)


def test_reply_status_outside_the_three_values_is_rejected() -> None:
    with pytest.raises(BridgeError, match=r"Invalid enum value 'done' - at `\$\.status`"):
        InsertCellReply.from_dict({"request_id": "r", "status": "done", "message": ""})


def test_records_built_in_python_are_checked_like_decoded_ones() -> None:
    # msgspec checks only when decoding; the records check when built too (a widget's request).
    with pytest.raises(BridgeError, match=r"InsertCellRequest\.cell_id"):
        InsertCellRequest("r", "no spaces", FIX, "t")
    with pytest.raises(BridgeError, match=r"InsertCellRequest\.source"):
        InsertCellRequest("r", None, "x" * (bridge.MAX_SOURCE_CHARS + 1), "t")
    with pytest.raises(BridgeError, match=r"InsertCellReply\.status"):
        InsertCellReply("r", "done", "")  # type: ignore[arg-type]


# ------------------------------------------------------------- the contract the TypeScript uses

# msgspec's JSON Schema of the records, written where the labextension imports it, and the
# TypeScript types generated from that schema. Both are committed; these tests fail on any drift.
# Regenerate both with: PYTHONPATH=. python tests/test_bridge.py
SCHEMA_JSON = ROOT / "labextension" / "src" / "bridge.schema.json"
TYPES_TS = ROOT / "labextension" / "src" / "bridge.types.ts"
_JSON_TO_TS = {"string": "string", "null": "null", "boolean": "boolean", "integer": "number"}


def _schema_text() -> str:
    return json.dumps(bridge.contract(), indent=2) + "\n"


def _ts_type(prop: dict[str, Any]) -> str:
    if "anyOf" in prop:
        return " | ".join(_ts_type(member) for member in prop["anyOf"])
    if "enum" in prop:
        return " | ".join(json.dumps(value).replace('"', "'") for value in prop["enum"])
    if "$ref" in prop:
        return "I" + prop["$ref"].rsplit("/", 1)[1]
    return _JSON_TO_TS[prop["type"]]


def _ts_bounds(prop: dict[str, Any]) -> list[str]:
    """The constraints of one property, as words for its doc comment."""
    members = prop.get("anyOf", [prop])
    words = [f"at most {m['maxLength']} characters" for m in members if "maxLength" in m]
    words += [f"matches {m['pattern']}" for m in members if "pattern" in m]
    return words


def typescript_types(contract: dict[str, Any]) -> str:
    """``bridge.types.ts``: the channel names and one interface per record of ``contract``."""
    lines = [
        "// Generated from bridge.schema.json (gpu_notebook/bridge.py) by tests/test_bridge.py;",
        "// do not edit: run `PYTHONPATH=. python tests/test_bridge.py` after changing the records.",
        "",
    ]
    for name, value in contract["constants"].items():
        lines.append(f"export const {name} = {json.dumps(value)};".replace('"', "'"))
    for name, definition in contract["$defs"].items():
        lines += [
            "",
            "/**",
            *[f" * {ln}".rstrip() for ln in definition.get("description", name).splitlines()],
            " */",
        ]
        lines.append(f"export interface I{name} {{")
        for field, prop in definition["properties"].items():
            bounds = _ts_bounds(prop)
            if bounds:
                lines.append(f"  /** {'; '.join(bounds)} */")
            lines.append(f"  {field}: {_ts_type(prop)};")
        lines.append("}")
    return "\n".join(lines) + "\n"


def write_contract() -> None:
    SCHEMA_JSON.write_text(_schema_text(), encoding="utf-8")
    TYPES_TS.write_text(typescript_types(bridge.contract()), encoding="utf-8")


def test_the_committed_schema_is_the_schema_of_the_records() -> None:
    assert SCHEMA_JSON.read_text(encoding="utf-8") == _schema_text(), (
        "labextension/src/bridge.schema.json is stale: PYTHONPATH=. python tests/test_bridge.py"
    )


def test_the_committed_typescript_types_are_generated_from_the_schema() -> None:
    assert TYPES_TS.read_text(encoding="utf-8") == typescript_types(bridge.contract()), (
        "labextension/src/bridge.types.ts is stale: PYTHONPATH=. python tests/test_bridge.py"
    )


def test_the_schema_is_strict_and_bounded() -> None:
    # What the labextension relies on when it validates a request with the schema.
    defs = bridge.contract()["$defs"]
    request, reply = defs["InsertCellRequest"], defs["InsertCellReply"]
    for record in (request, reply):
        assert record["additionalProperties"] is False
        assert record["required"] == list(record["properties"])
    assert request["properties"]["source"]["maxLength"] == bridge.MAX_SOURCE_CHARS
    assert request["properties"]["title"]["maxLength"] == bridge.MAX_TITLE_CHARS
    assert request["properties"]["request_id"]["pattern"] == "^[a-zA-Z0-9_-]{1,64}$"
    assert sorted(reply["properties"]["status"]["enum"]) == ["duplicate", "error", "inserted"]


def test_the_generator_sees_a_changed_field() -> None:
    # The drift check must be able to fail: a widened type changes the generated TypeScript.
    contract = bridge.contract()
    contract["$defs"]["InsertCellReply"]["properties"]["status"] = {"type": "string"}
    assert "status: string;" in typescript_types(contract)
    assert typescript_types(contract) != TYPES_TS.read_text(encoding="utf-8")


# ----------------------------------------------------------------------- version and packaging


_PRE_RELEASE = {"a": "alpha", "b": "beta", "rc": "rc"}


def _semver(version: str) -> str:
    """PEP 440 -> the npm version the extension template derives (0.2.0a1 -> 0.2.0-alpha.1)."""
    return re.sub(r"(a|b|rc)(\d+)$", lambda m: f"-{_PRE_RELEASE[m[1]]}.{m[2]}", version)


def test_package_json_version_is_the_python_version() -> None:
    package = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    assert package["version"] == _semver(gpu_notebook.__version__)
    assert package["jupyterlab"]["outputDir"] == "../gpu_notebook/labextension"


def test_labextension_list_shows_the_extension_enabled_ok() -> None:
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent))
    if jupyter is None:
        pytest.skip("jupyter is not installed next to this Python (pip install -e '.[test]')")
    result = subprocess.run(
        [jupyter, "labextension", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"NO_COLOR": "1", "PATH": str(Path(sys.executable).parent)},
        check=False,
    )
    listing = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    line = next((ln for ln in listing.splitlines() if "gpu-notebook" in ln), None)
    assert line is not None, listing
    assert re.search(
        rf"gpu-notebook v{re.escape(_semver(gpu_notebook.__version__))} enabled\s+OK", line
    ), line


# ------------------------------------------------------------------------- outside a kernel


def test_outside_a_kernel_insert_cell_answers_error_at_once() -> None:
    request = InsertCellRequest(request_id="r1", cell_id=None, source=FIX, title="t")
    pending = bridge.insert_cell(request)
    assert pending.done()
    assert pending.reply == InsertCellReply("r1", "error", "not running in a Jupyter kernel")
    assert bridge.current_cell_id() is None


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tempfile.gettempdir() points to an empty folder for this test."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert tempfile.gettempdir() == str(tmp_path)
    return tmp_path


@pytest.fixture
def shell() -> Any:
    """The real IPython shell of IPython.testing.globalipapp."""
    from IPython.testing.globalipapp import get_ipython

    return get_ipython()


def _load(shell: Any, line: str) -> str:
    """Run a ``%load ...`` line in ``shell``; return the text it puts in the cell."""
    assert line.startswith("%load ")
    shell.rl_next_input = None
    shell.run_line_magic("load", line.removeprefix("%load "))
    text: str = shell.rl_next_input
    return text


def test_the_load_line_loads_exactly_the_fix_in_a_real_shell_and_adds_no_name(shell: Any) -> None:
    source = FIX + "token = 'sk-\\'\"secret'  # quotes, backslashes, unicode: \u00e9\n"
    line = bridge.hold_fix(InsertCellRequest("held-1", None, source, "t"))
    names_before = set(shell.user_ns)
    assert _load(shell, line) == f"# {line}\n{source}"
    assert set(shell.user_ns) == names_before


def test_a_fix_the_kernel_no_longer_holds_loads_as_a_comment_saying_so(shell: Any) -> None:
    first = bridge.hold_fix(InsertCellRequest("evicted-0", None, FIX, "t"))
    for index in range(bridge.FIXES_HELD):
        bridge.hold_fix(InsertCellRequest(f"later-{index}", None, f"# {index}\n", "t"))
    loaded = _load(shell, first)
    assert "no longer holds fix evicted-0" in loaded and FIX not in loaded
    assert _load(shell, bridge.load_command(f"later-{bridge.FIXES_HELD - 1}")).endswith(
        f"# {bridge.FIXES_HELD - 1}\n"
    )


def test_load_command_refuses_an_id_that_could_break_out_of_the_expression() -> None:
    with pytest.raises(BridgeError, match="request_id"):
        bridge.load_command("x') or __import__('os').system('true")


def test_showing_a_fix_writes_no_file_to_the_temp_dir(private_tmp: Path, shell: Any) -> None:
    from gpu_notebook.views.insert_widget import InsertFixWidget

    widget = InsertFixWidget("workers", FIX, "", "cell-1", request_id="no-file-1")
    try:
        assert list(private_tmp.iterdir()) == []
        assert _load(shell, widget.load_command) == f"# {widget.load_command}\n{FIX}"
    finally:
        widget.close()


def test_a_folder_another_user_created_first_captures_nothing(
    private_tmp: Path, shell: Any
) -> None:
    # Another local user pre-creates the folder the fallback used, with a file of their own
    # under the next fix's name: they must neither read our fix nor get theirs loaded.
    planted = private_tmp / "gpu_notebook-fixes" / "captured-1.py"
    planted.parent.mkdir()
    planted.write_text("import os; os.system('steal')\n", encoding="utf-8")
    from gpu_notebook.views.insert_widget import InsertFixWidget

    widget = InsertFixWidget("workers", FIX, "", None, request_id="captured-1")
    try:
        assert [p.name for p in planted.parent.iterdir()] == ["captured-1.py"]
        assert planted.read_text(encoding="utf-8") == "import os; os.system('steal')\n"
        assert _load(shell, widget.load_command) == f"# {widget.load_command}\n{FIX}"
    finally:
        widget.close()


# ---------------------------------------------------------------------------- the widget


def test_widget_holds_the_request_and_its_load_line() -> None:
    from gpu_notebook.views.insert_widget import InsertFixWidget

    widget = InsertFixWidget("workers", FIX, "-a\n+b\n", "cell-1", request_id="w1")
    try:
        assert widget.request == InsertCellRequest("w1", "cell-1", FIX, "workers")
        assert widget.event_name == bridge.INSERT_EVENT
        assert widget.status == ""
        assert widget.load_command == bridge.load_command("w1")
        assert bridge.fix_source("w1") == FIX
        assert widget.load_command in repr(widget)
        assert (Path(bridge.__file__).parent / "views" / "insert_widget.js").is_file()
    finally:
        widget.close()


def test_widget_rejects_a_cell_id_the_notebook_could_not_hold() -> None:
    from gpu_notebook.views.insert_widget import InsertFixWidget

    with pytest.raises(BridgeError, match="cell_id"):
        InsertFixWidget("t", FIX, "", "not a cell id!")


def test_widget_status_reports_what_the_frontend_revealed(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_notebook.views.insert_widget import InsertFixWidget

    monkeypatch.setattr(bridge, "_frontend_state", None)
    widget = InsertFixWidget("t", FIX, "", None)
    try:
        widget.status = "fallback"
        assert bridge.frontend_has_extension() is False
        widget.status = "inserted"
        assert bridge.frontend_has_extension() is True
        widget.status = "fallback"  # a second, plainer frontend does not undo the proof
        assert bridge.frontend_has_extension() is True
    finally:
        widget.close()


def test_widget_view_is_plain_text_safe() -> None:
    # The view must never build HTML from strings: the source comes from the user's cell.
    js = (Path(bridge.__file__).parent / "views" / "insert_widget.js").read_text(encoding="utf-8")
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "outerHTML" not in js


# ------------------------------------------------------------- a real kernel, we play frontend


class Kernel:
    """A real ipykernel driven through jupyter_client; this side acts as the notebook frontend."""

    def __init__(self) -> None:
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3", startup_timeout=60)

    def execute(self, code: str, cell_id: str | None = None) -> str:
        """Send an execute_request (with JupyterLab's cellId metadata); return its msg id."""
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        metadata = {"cellId": cell_id} if cell_id else {}
        msg = self.client.session.msg("execute_request", content, metadata=metadata)
        self.client.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def iopub_until(self, msg_id: str, stop: Any, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Collect iopub messages of ``msg_id`` until ``stop(msg)`` is true (or the cell is idle)."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                msg = self.client.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            seen.append(msg)
            if stop(msg):
                return seen
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return seen
        raise AssertionError(f"timed out; got {[m['msg_type'] for m in seen]}")

    def run(self, code: str, cell_id: str | None = None) -> str:
        """Run a cell to the end; return its stdout (errors fail the test)."""
        msg_id = self.execute(code, cell_id)
        seen = self.iopub_until(msg_id, lambda m: False)
        errors = [m["content"] for m in seen if m["msg_type"] == "error"]
        assert not errors, "\n".join("\n".join(e["traceback"]) for e in errors)
        return "".join(m["content"]["text"] for m in seen if m["msg_type"] == "stream")

    def reply_of(self, msg_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """The execute_reply of ``msg_id`` (earlier replies on the shell channel are skipped)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = self.client.get_shell_msg(timeout=timeout_s)
            if msg["parent_header"].get("msg_id") == msg_id:
                return dict(msg["content"])
        raise AssertionError(f"no execute_reply for {msg_id}")

    def send_comm(self, msg_type: str, comm_id: str, data: dict[str, Any]) -> None:
        msg = self.client.session.msg(msg_type, {"comm_id": comm_id, "data": data})
        self.client.shell_channel.send(msg)

    def stop(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel() -> Iterator[Kernel]:
    k = Kernel()
    k.run("from gpu_notebook import bridge\nfrom gpu_notebook.bridge import InsertCellRequest")
    yield k
    k.stop()


def _comm_open(seen: list[dict[str, Any]]) -> dict[str, Any]:
    opens = [m for m in seen if m["msg_type"] == "comm_open"]
    assert len(opens) == 1, [m["msg_type"] for m in seen]
    return opens[0]["content"]


def test_current_cell_id_is_the_cell_id_of_the_execute_request(kernel: Kernel) -> None:
    assert kernel.run("print(bridge.current_cell_id())", cell_id="f00d-cell_1") == "f00d-cell_1\n"
    assert kernel.run("print(bridge.current_cell_id())") == "None\n"


def test_comm_request_reaches_the_frontend_and_the_reply_comes_back(kernel: Kernel) -> None:
    code = (
        "pending = bridge.insert_cell(InsertCellRequest('k1', 'target-cell', "
        f"{FIX!r}, 'workers'))\nprint(pending.reply)"
    )
    msg_id = kernel.execute(code, cell_id="caller")
    seen = kernel.iopub_until(msg_id, lambda m: False)
    opened = _comm_open(seen)
    assert opened["target_name"] == bridge.COMM_TARGET
    assert opened["data"] == {
        "request_id": "k1",
        "cell_id": "target-cell",
        "source": FIX,
        "title": "workers",
    }
    # Nothing answered while the cell ran: the reply is still pending.
    assert "None" in "".join(m["content"].get("text", "") for m in seen)
    reply = {"request_id": "k1", "status": "inserted", "message": "inserted as cell 3"}
    kernel.send_comm("comm_msg", opened["comm_id"], reply)
    kernel.send_comm("comm_close", opened["comm_id"], {})
    out = kernel.run(
        "print(pending.done(), pending.reply.to_dict(), bridge.frontend_has_extension())"
    )
    assert out == f"True {reply} True\n"


def test_a_frontend_without_the_extension_closing_the_comm_is_an_error_reply(
    kernel: Kernel,
) -> None:
    kernel.run("bridge._frontend_state = None")
    msg_id = kernel.execute(f"p2 = bridge.insert_cell(InsertCellRequest('k2', 'c', {FIX!r}, 't'))")
    opened = _comm_open(kernel.iopub_until(msg_id, lambda m: False))
    kernel.send_comm("comm_close", opened["comm_id"], {})  # what JupyterLab does without a target
    out = kernel.run(
        "print(p2.reply.status, bridge.frontend_has_extension()); print(p2.reply.message)"
    )
    status, message = out.splitlines()
    assert status == "error False"
    assert "labextension is not active" in message


def test_an_async_cell_gets_the_reply_while_it_runs(kernel: Kernel) -> None:
    code = (
        f"p3 = bridge.insert_cell(InsertCellRequest('k3', 'c', {FIX!r}, 't'))\n"
        "r3 = await p3.wait_async(20)\n"
        "print('GOT', r3.status if r3 else None)"
    )
    msg_id = kernel.execute(code)
    seen = kernel.iopub_until(msg_id, lambda m: m["msg_type"] == "comm_open")
    opened = _comm_open(seen)
    kernel.send_comm(
        "comm_msg", opened["comm_id"], {"request_id": "k3", "status": "duplicate", "message": "m"}
    )
    rest = kernel.iopub_until(msg_id, lambda m: False)
    printed = "".join(m["content"].get("text", "") for m in rest if m["msg_type"] == "stream")
    assert printed == "GOT duplicate\n"


def test_a_better_second_answer_wins_and_a_reply_for_another_request_is_an_error(
    kernel: Kernel,
) -> None:
    msg_id = kernel.execute(f"p4 = bridge.insert_cell(InsertCellRequest('k4', 'c', {FIX!r}, 't'))")
    opened = _comm_open(kernel.iopub_until(msg_id, lambda m: False))
    comm_id = opened["comm_id"]
    kernel.send_comm("comm_msg", comm_id, {"request_id": "k4", "status": "error", "message": "x"})
    kernel.send_comm(
        "comm_msg", comm_id, {"request_id": "k4", "status": "inserted", "message": "y"}
    )
    kernel.send_comm("comm_msg", comm_id, {"request_id": "other", "status": "error", "message": ""})
    assert kernel.run("print(p4.reply.status)") == "inserted\n"


def test_blocking_wait_on_the_kernel_main_thread_is_refused(kernel: Kernel) -> None:
    out = kernel.run(
        "try:\n"
        f"    bridge.insert_cell(InsertCellRequest('k5', 'c', {FIX!r}, 't'), timeout_s=1)\n"
        "except RuntimeError as e:\n"
        "    print('refused:', 'wait_async' in str(e))"
    )
    assert out == "refused: True\n"


def test_a_background_thread_can_wait_for_the_reply(kernel: Kernel) -> None:
    code = (
        "import threading\n"
        "box = {}\n"
        "def worker():\n"
        f"    box['p'] = bridge.insert_cell(InsertCellRequest('k6', 'c', {FIX!r}, 't'), timeout_s=20)\n"
        "t6 = threading.Thread(target=worker); t6.start()"
    )
    msg_id = kernel.execute(code)
    seen = kernel.iopub_until(msg_id, lambda m: False)  # the cell ends; the thread waits
    opens = [m["content"] for m in seen if m["msg_type"] == "comm_open"]
    deadline = time.monotonic() + 20
    while not opens and time.monotonic() < deadline:
        try:  # a quiet 5 s is a starved thread, not an answer: the deadline bounds the wait
            msg = kernel.client.get_iopub_msg(timeout=5)
        except queue.Empty:
            continue
        if msg["msg_type"] == "comm_open":
            opens.append(msg["content"])
    assert len(opens) == 1 and opens[0]["data"]["request_id"] == "k6"
    opened = opens[0]
    kernel.send_comm(
        "comm_msg", opened["comm_id"], {"request_id": "k6", "status": "inserted", "message": ""}
    )
    assert kernel.run("t6.join(20); print(box['p'].reply.status)") == "inserted\n"


def test_the_load_line_replaces_the_new_cell_with_the_fix(kernel: Kernel) -> None:
    # The fallback's one line, run as a normal cell: the frontend gets a set_next_input payload
    # that replaces that cell's text with the fix (this is what %load does in Jupyter).
    line = kernel.run(f"print(bridge.hold_fix(InsertCellRequest('k-load', None, {FIX!r}, 't')))")
    line = line.rstrip("\n")
    assert line == bridge.load_command("k-load")
    msg_id = kernel.execute(line)
    reply = kernel.reply_of(msg_id)
    assert reply["status"] == "ok"
    [payload] = reply["payload"]
    assert payload["source"] == "set_next_input"
    assert payload["replace"] is True
    assert payload["text"] == f"# {line}\n{FIX}"


def test_a_headless_run_keeps_a_plain_text_way_to_insert_the_fix() -> None:
    # nbclient (and any frontend without widgets) shows text/plain: the title and the %load line.
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from gpu_notebook.views.insert_widget import InsertFixWidget\n"
            f"InsertFixWidget('workers', {FIX!r}, '', None, request_id='headless-1')",
            id="profiled",
        )
    ]
    NotebookClient(nb, kernel_name="python3", timeout=60).execute()
    [output] = nb.cells[0].outputs
    assert "application/vnd.jupyter.widget-view+json" in output["data"]
    text = output["data"]["text/plain"]
    assert text.startswith("gpucheck fix: workers\nTo insert it, run in a new cell: %load ")
    assert text.endswith(bridge.load_command("headless-1"))
    assert len(nb.cells) == 1  # nothing inserted, nothing executed besides the cell itself


if __name__ == "__main__":
    write_contract()
