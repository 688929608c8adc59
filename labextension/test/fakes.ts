/** A notebook fake that behaves like NotebookPanelAdapter: cells with ids, metadata and nodes. */

import { INotebookAdapter } from '../src/insert';
import { IInsertedCellMetadata } from '../src/records';

export interface IFakeCell {
  id: string;
  source: string;
  cellType: 'code' | 'markdown';
  executed: boolean;
  metadata: { gpu_notebook?: IInsertedCellMetadata };
  /** Stands for the cell's DOM node: an event target "inside" the cell is this object. */
  node: object;
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
      node: { cell: id }
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

  indexOfCellContaining(target: unknown): number {
    return this.cells.findIndex(cell => cell.node === target);
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
      node: { cell: id }
    });
  }

  ids(): string[] {
    return this.cells.map(cell => cell.id);
  }

  nodeOf(id: string): object {
    const cell = this.cells.find(c => c.id === id);
    if (!cell) {
      throw new Error(`no cell ${id}`);
    }
    return cell.node;
  }
}
