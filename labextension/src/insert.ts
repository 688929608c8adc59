/**
 * The insertion itself, over a small notebook interface (tested in Node without JupyterLab).
 *
 * Rules: never execute anything; insert one code cell directly below the target cell; dedupe
 * by request_id, which the inserted cell keeps in its metadata (so the dedupe survives reloads
 * and both channels share it); leave every other cell untouched.
 */

import {
  IInsertCellReply,
  IInsertCellRequest,
  IInsertedCellMetadata
} from './records';

/** The notebook operations the insertion needs (adapter.ts implements them for JupyterLab). */
export interface INotebookAdapter {
  /** Number of cells. */
  readonly cellCount: number;
  /** The nbformat id of cell `index`. */
  cellId(index: number): string;
  /** The request id an earlier insertion stored on cell `index`, or null. */
  insertedRequestId(index: number): string | null;
  /** Index of the cell whose node contains `target` (a DOM node), or -1. */
  indexOfCellContaining(target: unknown): number;
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

/**
 * The cell to insert below: the one enclosing `eventTarget` (DOM channel), else the one whose id
 * is `request.cell_id`. -1 when neither is found.
 */
export function findTargetIndex(
  notebook: INotebookAdapter,
  request: IInsertCellRequest,
  eventTarget?: unknown
): number {
  if (eventTarget !== undefined && eventTarget !== null) {
    const enclosing = notebook.indexOfCellContaining(eventTarget);
    if (enclosing >= 0) {
      return enclosing;
    }
  }
  return request.cell_id === null ? -1 : indexOfCellId(notebook, request.cell_id);
}

/**
 * Insert `request.source` below its target cell, unless this request was inserted already.
 *
 * @returns the reply for the kernel / widget; never throws for a missing target.
 */
export function insertBelow(
  notebook: INotebookAdapter,
  request: IInsertCellRequest,
  eventTarget?: unknown
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
  const target = findTargetIndex(notebook, request, eventTarget);
  if (target < 0) {
    const which =
      request.cell_id === null ? 'the request names no cell' : `no cell has id ${request.cell_id}`;
    return { request_id, status: 'error', message: `nothing inserted: ${which}` };
  }
  notebook.insertCodeCell(target + 1, request.source, { request_id, title: request.title });
  return {
    request_id,
    status: 'inserted',
    message: `inserted as cell ${target + 2}, below cell ${target + 1}`
  };
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
    return {
      request_id: request.request_id,
      status: 'error',
      message: 'nothing inserted: no open notebook uses this kernel'
    };
  }
  const withDuplicate = notebooks.find(nb => indexOfRequest(nb, request.request_id) >= 0);
  const withTarget = notebooks.find(nb => findTargetIndex(nb, request) >= 0);
  return insertBelow(withDuplicate ?? withTarget ?? notebooks[0], request);
}
