// MathJax 3 for pymdownx.arithmatex's generic output (\( ... \) and \[ ... \] inside
// elements of class "arithmatex"); MathJax itself is served by the site (assets/mathjax).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};

// Typeset again when Material for MkDocs swaps the page's content.
document$.subscribe(() => {
  if (window.MathJax && window.MathJax.typesetPromise) {
    MathJax.startup.output.clearCache();
    MathJax.typesetClear();
    MathJax.texReset();
    MathJax.typesetPromise();
  }
});
