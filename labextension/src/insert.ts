/**
 * The insertion itself, over a small notebook interface (tested in Node without JupyterLab).
 *
 * Rules: never execute anything; insert one code cell directly below the target cell; dedupe
 * by request_id, which the inserted cell keeps in its metadata (so the dedupe survives reloads
 * and both channels share it); leave every other cell untouched.
 */

import { IInsertCellReply, IInsertCellRequest, IInsertedCellMetadata } from './records';

/** The notebook operations the insertion needs (adapter.ts implements them for JupyterLab). */
export interface INotebookAdapter {
  /** Number of cells. */
  readonly cellCount: number;
  /** The nbformat id of cell `index`. */
  cellId(index: number): string;
  /** The request id an earlier insertion stored on cell `index`, or null. */
  insertedRequestId(index: number): string | null;
  /** Index of the code cell whose *output area* contains `target` (a DOM node), or -1. */
  indexOfOutputContaining(target: unknown): number;
  /** True when `node` is (inside) the Insert button of the fix widget whose root is `widget`. */
  isInsertButtonIn(node: unknown, widget: unknown): boolean;
  /** Insert a code cell (no outputs, never run) at `index`. */
  insertCodeCell(index: number, source: string, metadata: IInsertedCellMetadata): void;
}

/** Index of the cell with nbformat id `cellId`, or -1. */
export function indexOfCellId(notebook: INotebookAdapter, cellId: string): number {
  for (let index = 0; index < notebook.cellCount; index++) {
    if (notebook.cellId(index) === cellId) {
      return index;
    }
  }
  return -1;
}

/** Index of the cell an earlier insertion of `requestId` created, or -1. */
export function indexOfRequest(notebook: INotebookAdapter, requestId: string): number {
  for (let index = 0; index < notebook.cellCount; index++) {
    if (notebook.insertedRequestId(index) === requestId) {
      return index;
    }
  }
  return -1;
}

function refused(request_id: string, why: string): IInsertCellReply {
  return { request_id, status: 'error', message: `nothing inserted: ${why}` };
}

/** Insert below cell `target` unless this request was inserted already. */
function insertAt(
  notebook: INotebookAdapter,
  request: IInsertCellRequest,
  target: number
): IInsertCellReply {
  const { request_id } = request;
  const existing = indexOfRequest(notebook, request_id);
  if (existing >= 0) {
    return {
      request_id,
      status: 'duplicate',
      message: `cell ${existing + 1} already holds this fix`
    };
  }
  notebook.insertCodeCell(target + 1, request.source, { request_id, title: request.title });
  return {
    request_id,
    status: 'inserted',
    message: `inserted as cell ${target + 2}, below cell ${target + 1}`
  };
}

/**
 * Comm channel: insert `request.source` below the cell whose id is `request.cell_id`, unless
 * this request was inserted already.
 *
 * @returns the reply for the kernel; never throws for a missing target.
 */
export function insertBelow(
  notebook: INotebookAdapter,
  request: IInsertCellRequest
): IInsertCellReply {
  const { request_id, cell_id } = request;
  const target = cell_id === null ? -1 : indexOfCellId(notebook, cell_id);
  // A duplicate is answered even when its target cell is gone (insertAt checks it first).
  if (target < 0 && indexOfRequest(notebook, request_id) < 0) {
    const which = cell_id === null ? 'the request names no cell' : `no cell has id ${cell_id}`;
    return refused(request_id, which);
  }
  return insertAt(notebook, request, target);
}

/**
 * DOM channel: insert below the cell whose output holds the widget `widgetNode`, and only when
 * that cell is the one the widget was made for (`request.cell_id`, read by the kernel while the
 * cell ran). A widget shown again in another cell, or moved there, inserts nothing.
 */
export function insertBelowWidget(
  notebook: INotebookAdapter,
  request: IInsertCellRequest,
  widgetNode: unknown
): IInsertCellReply {
  const { request_id, cell_id } = request;
  const index = notebook.indexOfOutputContaining(widgetNode);
  if (index < 0) {
    return refused(request_id, "the widget is not in a cell's output");
  }
  if (cell_id === null) {
    return refused(request_id, 'the widget does not know the cell it was made in');
  }
  const holder = notebook.cellId(index);
  if (holder !== cell_id) {
    return refused(request_id, `the widget was made in cell ${cell_id}, not in cell ${holder}`);
  }
  return insertAt(notebook, request, index);
}

/**
 * Answer a request for whichever of `notebooks` holds its target cell (several notebooks can
 * share one kernel connection); a duplicate anywhere wins over an insertion.
 */
export function insertInNotebooks(
  notebooks: ReadonlyArray<INotebookAdapter>,
  request: IInsertCellRequest
): IInsertCellReply {
  if (notebooks.length === 0) {
    return refused(request.request_id, 'no open notebook uses this kernel');
  }
  const withDuplicate = notebooks.find(nb => indexOfRequest(nb, request.request_id) >= 0);
  const { cell_id } = request;
  const withTarget =
    cell_id === null ? undefined : notebooks.find(nb => indexOfCellId(nb, cell_id) >= 0);
  return insertBelow(withDuplicate ?? withTarget ?? notebooks[0], request);
}
