/** A notebook fake that behaves like NotebookPanelAdapter: cells with ids, metadata and outputs. */

import { INotebookAdapter } from '../src/insert';
import { IInsertedCellMetadata } from '../src/records';

export interface IFakeCell {
  id: string;
  source: string;
  cellType: 'code' | 'markdown';
  executed: boolean;
  metadata: { gpu_notebook?: IInsertedCellMetadata };
  /** Stand for the DOM nodes shown in the cell's output area (widget roots). */
  outputs: unknown[];
}

/** A fix widget's root node and its Insert button, as the adapter sees them. */
export interface IFakeWidget {
  root: object;
  button: { insertButtonOf: object };
}

export function fakeWidget(root: object = {}): IFakeWidget {
  return { root, button: { insertButtonOf: root } };
}

export class FakeNotebook implements INotebookAdapter {
  cells: IFakeCell[];
  inserts = 0;
  private _nextId = 0;

  constructor(ids: string[]) {
    this.cells = ids.map(id => ({
      id,
      source: `# cell ${id}`,
      cellType: 'code',
      executed: true,
      metadata: {},
      outputs: []
    }));
  }

  get cellCount(): number {
    return this.cells.length;
  }

  cellId(index: number): string {
    return this.cells[index].id;
  }

  insertedRequestId(index: number): string | null {
    return this.cells[index].metadata.gpu_notebook?.request_id ?? null;
  }

  indexOfOutputContaining(target: unknown): number {
    return this.cells.findIndex(cell => cell.outputs.includes(target));
  }

  isInsertButtonIn(node: unknown, widget: unknown): boolean {
    return typeof node === 'object' && node !== null && 'insertButtonOf' in node
      ? node.insertButtonOf === widget
      : false;
  }

  insertCodeCell(index: number, source: string, metadata: IInsertedCellMetadata): void {
    this.inserts++;
    const id = `new-${this._nextId++}`;
    this.cells.splice(index, 0, {
      id,
      source,
      cellType: 'code',
      executed: false,
      metadata: { gpu_notebook: metadata },
      outputs: []
    });
  }

  /** Show a fix widget in the output of cell `id`; returns it. */
  showWidget(id: string, widget: IFakeWidget = fakeWidget()): IFakeWidget {
    const cell = this.cells.find(c => c.id === id);
    if (!cell) {
      throw new Error(`no cell ${id}`);
    }
    cell.outputs.push(widget.root);
    return widget;
  }

  ids(): string[] {
    return this.cells.map(cell => cell.id);
  }
}
