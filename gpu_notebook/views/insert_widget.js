// @ts-check
// View of InsertFixWidget (anywidget ESM): title, diff preview, "Insert fix" button, and the
// copy / %load fallback shown when no gpu-notebook labextension answers the DOM event.
// Every string from the kernel is set with textContent: the source comes from the user's cell.
// Type-checked (strict) by `jlpm test` in labextension/ against the records in src/records.ts.

/** @typedef {import('../../labextension/src/records').IInsertCellRequest} IInsertCellRequest */
/** @typedef {import('../../labextension/src/records').IInsertCellReply} IInsertCellReply */
/** @typedef {import('../../labextension/src/records').IInsertCellEventDetail} IInsertCellEventDetail */
/** @typedef {import('../../labextension/src/records').InsertStatus} InsertStatus */
/** The view's own two (insert_widget.WidgetStatus) and the extension's replies (bridge.InsertStatus). */
/** @typedef {"" | "fallback" | InsertStatus} WidgetStatus */

/**
 * The traits of InsertFixWidget (gpu_notebook/views/insert_widget.py).
 * @typedef {object} IWidgetTraits
 * @property {string} title
 * @property {string} source
 * @property {string} diff
 * @property {string | null} cell_id
 * @property {string} request_id
 * @property {string} event_name
 * @property {string} load_command
 * @property {WidgetStatus} status
 * @property {string} message
 */

/** @typedef {import('@anywidget/types').AnyModel<IWidgetTraits>} IModel */
/** @typedef {import('@anywidget/types').RenderProps<IWidgetTraits>} IRenderProps */

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {string} className
 * @param {string} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
function h(tag, className, text) {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/**
 * Fill a <pre> with one span per diff line, classed by its first character.
 * @param {HTMLElement} pre
 * @param {string} diff
 */
function renderDiff(pre, diff) {
  pre.replaceChildren();
  for (const line of diff.split('\n')) {
    let kind = 'context';
    if (line.startsWith('+++') || line.startsWith('---')) {
      kind = 'file';
    } else if (line.startsWith('@@')) {
      kind = 'hunk';
    } else if (line.startsWith('+')) {
      kind = 'add';
    } else if (line.startsWith('-')) {
      kind = 'del';
    }
    pre.append(h('span', `gpu-nb-fix-diff-${kind}`, line + '\n'));
  }
}

/**
 * Put text on the clipboard: navigator.clipboard, else select the node for Ctrl+C.
 * @param {string} text
 * @param {HTMLElement} node the element that shows the text (selected by the fallback)
 * @returns {Promise<boolean>} true when the text reached the clipboard
 */
async function copyText(text, node) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Denied (permissions, iframe without clipboard-write): fall back to a selection.
    }
  }
  const selection = window.getSelection();
  if (selection) {
    const range = document.createRange();
    range.selectNodeContents(node);
    selection.removeAllRanges();
    selection.addRange(range);
  }
  try {
    // Deprecated but still the only synchronous path in older or sandboxed frontends.
    return document.execCommand('copy');
  } catch {
    return false;
  }
}

/**
 * Dispatch the insert event from `el`; an extension answers synchronously.
 * Call it while the user's click is being dispatched and pass that click as `trigger`: the
 * extension answers only a real click on this widget's Insert button (a script cannot make one).
 * @param {EventTarget} el
 * @param {string} eventName
 * @param {IInsertCellRequest} request
 * @param {Event | null} trigger
 * @returns {IInsertCellEventDetail} the detail, with handled/reply filled by the extension
 */
export function dispatchInsert(el, eventName, request, trigger) {
  /** @type {IInsertCellEventDetail} */
  const detail = { ...request, handled: false, reply: null, trigger };
  const event = new CustomEvent(eventName, {
    detail,
    bubbles: true,
    cancelable: true,
    composed: true
  });
  el.dispatchEvent(event);
  if (event.defaultPrevented && !detail.handled) {
    detail.handled = true;
  }
  return detail;
}

/** @type {ReadonlyArray<keyof IWidgetTraits>} */
const WATCHED = ['title', 'source', 'diff', 'load_command', 'status', 'message'];

/** @type {Record<WidgetStatus, string>} */
const STATUS_TEXT = {
  '': '',
  inserted: 'Inserted below: a new cell holds the fix (not run yet).',
  duplicate: 'Already inserted below: this fix has its cell.',
  error: 'Could not insert the cell',
  fallback: 'No notebook extension answered here: copy the code into a new cell.'
};

/**
 * @param {Pick<IRenderProps, 'model' | 'el'>} props
 * @returns {() => void} cleanup
 */
function render({ model, el }) {
  const root = h('div', 'gpu-nb-fix');
  const header = h('div', 'gpu-nb-fix-header');
  const title = h('span', 'gpu-nb-fix-title');
  header.append(title);

  const details = h('details', 'gpu-nb-fix-diff');
  details.append(h('summary', 'gpu-nb-fix-diff-summary', 'Preview the change'));
  const diffPre = h('pre', 'gpu-nb-fix-diff-body');
  details.append(diffPre);

  const actions = h('div', 'gpu-nb-fix-actions');
  const insertButton = h('button', 'gpu-nb-fix-insert', 'Insert fix');
  insertButton.type = 'button';
  insertButton.title = 'Insert the patched code as a new cell below (it is not run)';
  const status = h('span', 'gpu-nb-fix-status');
  status.setAttribute('role', 'status');
  status.setAttribute('aria-live', 'polite');
  actions.append(insertButton, status);

  const fallback = h('div', 'gpu-nb-fix-fallback');
  fallback.hidden = true;
  const loadRow = h('div', 'gpu-nb-fix-load');
  loadRow.append(h('span', 'gpu-nb-fix-load-label', 'Or run this line in a new cell: '));
  const loadLine = h('code', 'gpu-nb-fix-load-line');
  const copyLoad = h('button', 'gpu-nb-fix-copy-load', 'Copy line');
  copyLoad.type = 'button';
  loadRow.append(loadLine, copyLoad);
  const codeRow = h('div', 'gpu-nb-fix-code-row');
  const copyCode = h('button', 'gpu-nb-fix-copy', 'Copy');
  copyCode.type = 'button';
  const copyStatus = h('span', 'gpu-nb-fix-copy-status');
  copyStatus.setAttribute('role', 'status');
  codeRow.append(copyCode, copyStatus);
  const codePre = h('pre', 'gpu-nb-fix-code');
  fallback.append(codePre, codeRow, loadRow);

  root.append(header, details, actions, fallback);
  el.append(root);

  function update() {
    title.textContent = model.get('title');
    renderDiff(diffPre, model.get('diff'));
    details.hidden = model.get('diff') === '';
    codePre.textContent = model.get('source');
    loadLine.textContent = model.get('load_command');
    const current = model.get('status');
    root.dataset.status = current;
    const message = model.get('message');
    status.textContent =
      current === 'error' && message !== ''
        ? `${STATUS_TEXT.error}: ${message}. Copy the code below.`
        : STATUS_TEXT[current];
    fallback.hidden = current !== 'fallback' && current !== 'error';
  }

  /** @param {MouseEvent} click */
  function onInsert(click) {
    const detail = dispatchInsert(
      el,
      model.get('event_name'),
      {
        request_id: model.get('request_id'),
        cell_id: model.get('cell_id'),
        source: model.get('source'),
        title: model.get('title')
      },
      click
    );
    /** @type {WidgetStatus} */
    let next = 'fallback';
    let message = '';
    if (detail.handled) {
      const reply = detail.reply;
      next = reply ? reply.status : 'error';
      message = reply ? reply.message : 'the extension gave no reply';
    }
    model.set('status', next);
    model.set('message', message);
    // Reaches the kernel when it is free; the view above is already up to date.
    model.save_changes();
    update();
  }

  /**
   * @param {string} text
   * @param {HTMLElement} node
   * @param {string} what
   */
  async function onCopy(text, node, what) {
    const copied = await copyText(text, node);
    copyStatus.textContent = copied
      ? `${what} copied to the clipboard.`
      : `${what} selected: press Ctrl+C (Cmd+C) to copy.`;
  }

  const copyCodeHandler = () => void onCopy(model.get('source'), codePre, 'Code');
  const copyLoadHandler = () => void onCopy(model.get('load_command'), loadLine, 'Line');
  insertButton.addEventListener('click', onInsert);
  copyCode.addEventListener('click', copyCodeHandler);
  copyLoad.addEventListener('click', copyLoadHandler);
  for (const name of WATCHED) {
    model.on(`change:${name}`, update);
  }
  update();

  return () => {
    insertButton.removeEventListener('click', onInsert);
    copyCode.removeEventListener('click', copyCodeHandler);
    copyLoad.removeEventListener('click', copyLoadHandler);
    for (const name of WATCHED) {
      model.off(`change:${name}`, update);
    }
  };
}

export default { render };
