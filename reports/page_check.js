// Inlined into index.html (no external script). Two jobs.
//
// 1. A link to a claim opens its folded detail: the detail of the target of the address's
//    #fragment (on load and on every link followed) and of every <details> around it.
//
// 2. After the page loads it marks every figure that decoded and records a few layout facts as
//    data attributes, so that a headless browser's DOM dump shows them
//    (tests/test_report_browser.py): whether the page is wider than the window, which summary
//    tables are wider than their box, where the first screen's per-paper lists end, where the
//    summary part ends (the top of "Claims in detail"), how many claim rows take more than one
//    line, and where the first claim figure lies (a screenshot of it is cropped from a tall
//    one; the address #first-figure opens its detail for that).
function openTarget(id) {
  var node = id ? document.getElementById(id) : null;
  while (node) {
    if (node.tagName === 'DETAILS') { node.open = true; }
    node = node.parentElement;
  }
}
window.addEventListener('hashchange', function () {
  openTarget(decodeURIComponent(location.hash.slice(1)));
});
window.addEventListener('load', function () {
  var body = document.body;
  var root = document.documentElement;
  var bottom = function (element) {
    return element ? String(Math.round(element.getBoundingClientRect().bottom + window.scrollY))
                   : 'none';
  };
  var top = function (element) {
    return element ? String(Math.round(element.getBoundingClientRect().top + window.scrollY))
                   : 'none';
  };
  var imgs = document.querySelectorAll('img');
  var ok = 0;
  imgs.forEach(function (img) {
    var good = img.complete && img.naturalWidth > 0;
    img.setAttribute('data-loaded', good ? 'yes' : 'no');
    if (good) { ok += 1; }
  });
  body.setAttribute('data-figures', ok + '/' + imgs.length);
  body.setAttribute('data-viewport', window.innerWidth + 'x' + window.innerHeight);
  body.setAttribute('data-page-overflow', String(root.scrollWidth > root.clientWidth));
  var wide = [];
  document.querySelectorAll('table.summary-table').forEach(function (table) {
    if (table.getClientRects().length === 0) { return; }  // folded away
    var box = table.parentElement.getBoundingClientRect();
    var own = table.getBoundingClientRect();
    if (table.scrollWidth > table.clientWidth + 1 || own.right > box.right + 1 ||
        own.right > root.clientWidth) {
      wide.push(table.id);
    }
  });
  // in a fixed-layout table a cell's content can spill out while the table keeps its width;
  // the one-line cells (.clip) end in an ellipsis instead, by design
  var spilled = 0;
  document.querySelectorAll('table.summary-table td, table.summary-table th').forEach(
    function (cell) {
      if (!cell.classList.contains('clip') && cell.getClientRects().length > 0 &&
          cell.scrollWidth > cell.clientWidth + 1) { spilled += 1; }
    });
  body.setAttribute('data-spilled-cells', String(spilled));
  body.setAttribute('data-summary-tables', String(
    document.querySelectorAll('table.summary-table').length));
  body.setAttribute('data-wide-tables', wide.join(' '));
  // one line per claim row: a row taller than 1.6 lines of its first cell's text wrapped
  var rows = document.querySelectorAll('tr.claim-row');
  var tall = 0;
  rows.forEach(function (row) {
    var line = parseFloat(getComputedStyle(row.cells[0]).lineHeight) || 20;
    if (row.getBoundingClientRect().height > 1.6 * line + 8) { tall += 1; }
  });
  body.setAttribute('data-claim-rows', String(rows.length));
  body.setAttribute('data-multiline-rows', String(tall));
  body.setAttribute('data-glance-bottom', bottom(document.getElementById('at-a-glance')));
  body.setAttribute('data-summary-bottom', top(document.getElementById('details')));
  body.setAttribute('data-page-height', String(root.scrollHeight));
  var figure = document.querySelector('details.claim figure');
  if (figure && location.hash === '#first-figure') { openTarget(figure.id); }
  if (figure) {
    body.setAttribute('data-first-figure', figure.id);
    body.setAttribute('data-first-figure-top', top(figure));
    body.setAttribute('data-first-figure-height', String(Math.round(figure.offsetHeight)));
  }
  if (location.hash !== '#first-figure') {
    openTarget(decodeURIComponent(location.hash.slice(1)));
  }
});
