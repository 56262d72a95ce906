// Inlined into index.html (no external script). After the page loads it marks every figure
// that decoded and records a few layout facts as data attributes, so that a headless browser's
// DOM dump shows them (tests/test_report_browser.py): whether the page is wider than the
// window, which summary tables are wider than their box, where the verdict matrix ends and
// where the first claim figure lies (a screenshot of it is cropped from a tall one).
window.addEventListener('load', function () {
  var body = document.body;
  var root = document.documentElement;
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
    var box = table.parentElement.getBoundingClientRect();
    var own = table.getBoundingClientRect();
    if (table.scrollWidth > table.clientWidth + 1 || own.right > box.right + 1 ||
        own.right > root.clientWidth) {
      wide.push(table.id);
    }
  });
  // in a fixed-layout table a cell's content can spill out while the table keeps its width
  var spilled = 0;
  document.querySelectorAll('table.summary-table td, table.summary-table th').forEach(
    function (cell) { if (cell.scrollWidth > cell.clientWidth + 1) { spilled += 1; } });
  body.setAttribute('data-spilled-cells', String(spilled));
  body.setAttribute('data-summary-tables', String(
    document.querySelectorAll('table.summary-table').length));
  body.setAttribute('data-wide-tables', wide.join(' '));
  var figure = document.querySelector('article.claim figure');
  if (figure) {
    var top = figure.getBoundingClientRect().top + window.scrollY;
    body.setAttribute('data-first-figure', figure.id);
    body.setAttribute('data-first-figure-top', String(Math.round(top)));
    body.setAttribute('data-first-figure-height', String(Math.round(figure.offsetHeight)));
  }
  var matrix = document.getElementById('verdict-matrix');
  if (matrix) {
    var rect = matrix.getBoundingClientRect();
    body.setAttribute('data-matrix-bottom', String(Math.round(rect.bottom + window.scrollY)));
    body.setAttribute('data-matrix-right', String(Math.round(rect.right)));
  }
});
