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

  indexOfOutputContaining(target: unknown): number {
    const area = target instanceof Element ? target.closest('.jp-Cell-outputArea') : null;
    if (area === null) {
      return -1;
    }
    return this._panel.content.widgets.findIndex(
      cell => cell.model.type === 'code' && cell.node.contains(area)
    );
  }

  isInsertButtonIn(node: unknown, widget: unknown): boolean {
    if (!(node instanceof Element) || !(widget instanceof Element)) {
      return false;
    }
    // The class the widget view (gpu_notebook/views/insert_widget.js) gives its Insert button.
    const button = node.closest('button.gpu-nb-fix-insert');
    return button !== null && widget.contains(button);
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
