// Generated from bridge.schema.json (gpu_notebook/bridge.py) by tests/test_bridge.py;
// do not edit: run `PYTHONPATH=. python tests/test_bridge.py` after changing the records.

export const COMM_TARGET = 'gpu_notebook.insert_cell';
export const INSERT_EVENT = 'gpu-notebook:insert-cell';
export const CELL_METADATA_KEY = 'gpu_notebook';

/**
 * Kernel/widget -> frontend: insert ``source`` as a new code cell below cell ``cell_id``.
 *
 * ``request_id`` makes the request idempotent: a second request with the same id inserts
 * nothing and is answered ``duplicate``. ``cell_id`` is the nbformat id of the profiled cell
 * (:func:`current_cell_id`), None when unknown (the frontend then answers ``error``: it only
 * inserts below the cell the request names). ``source`` holds the fix's
 * ``# gpucheck fix: ...`` comment on a line of its own: its first line, or lower where the fix
 * is placed after the line binding what it sets. ``title`` is the fix's one-line name.
 */
export interface IInsertCellRequest {
  /** matches ^[a-zA-Z0-9_-]{1,64}$ */
  request_id: string;
  /** matches ^[a-zA-Z0-9_-]{1,64}$ */
  cell_id: string | null;
  /** at most 500000 characters */
  source: string;
  /** at most 300 characters */
  title: string;
}

/**
 * Frontend -> kernel: what became of one :class:`InsertCellRequest`.
 *
 * ``inserted``: a new code cell holds the source, directly below the target cell.
 * ``duplicate``: a cell inserted for this ``request_id`` already exists; nothing changed.
 * ``error``: nothing inserted; ``message`` says why (target cell not found, no notebook...).
 * ``request_id`` is free-form here: a reply to a malformed request echoes what it got.
 */
export interface IInsertCellReply {
  request_id: string;
  status: 'duplicate' | 'error' | 'inserted';
  /** at most 2000 characters */
  message: string;
}
