/** INotebookAdapter for a JupyterLab / Notebook 7 NotebookPanel. */

import { NotebookPanel } from '@jupyterlab/notebook';

import { INotebookAdapter } from './insert';
import { CELL_METADATA_KEY, IInsertedCellMetadata, insertedRequestId } from './records';

export class NotebookPanelAdapter implements INotebookAdapter {
  constructor(private readonly _panel: NotebookPanel) {}

  get cellCount(): number {
    return this._panel.content.model?.cells.length ?? 0;
  }

  cellId(index: number): string {
    return this._cells().get(index).id;
  }

  insertedRequestId(index: number): string | null {
    return insertedRequestId(this._cells().get(index).getMetadata(CELL_METADATA_KEY));
  }

  indexOfCellContaining(target: unknown): number {
    if (!(target instanceof Node)) {
      return -1;
    }
    return this._panel.content.widgets.findIndex(cell => cell.node.contains(target));
  }

  insertCodeCell(index: number, source: string, metadata: IInsertedCellMetadata): void {
    const model = this._panel.content.model;
    if (model === null) {
      throw new Error('the notebook has no model');
    }
    // Through the shared model: no active-cell change, no execution, other cells untouched.
    model.sharedModel.insertCell(index, {
      cell_type: 'code',
      source,
      metadata: { [CELL_METADATA_KEY]: { request_id: metadata.request_id, title: metadata.title } }
    });
  }

  private _cells(): NonNullable<NotebookPanel['content']['model']>['cells'] {
    const model = this._panel.content.model;
    if (model === null) {
      throw new Error('the notebook has no model');
    }
    return model.cells;
  }
}
