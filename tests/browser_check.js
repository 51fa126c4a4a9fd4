/* Injected first into <head> of each page (temporary copies only) by tests/test_browser.py.
 *
 * It records failed resource loads from the start, waits until MathJax has typeset the
 * page, the widget manager has rendered every saved widget view and every explorer's
 * script has built its controls (or a time limit), moves each explorer's controls, then writes what it observed as JSON into <pre id="browser-check">, which the test
 * reads from the DOM that headless Chromium dumps. It judges nothing itself.
 */
(function () {
  "use strict";
  var LIMIT_MS = 20000, STEP_MS = 100;
  var failedLoads = [], jsErrors = [];

  window.addEventListener("error", function (event) {
    var t = event.target;
    if (t && t !== window && t.tagName) {
      failedLoads.push(t.tagName.toLowerCase() + " " + (t.currentSrc || t.src || t.href || "(no url)"));
    } else {
      jsErrors.push(String(event.message || event.error || "error"));
    }
  }, true);
  window.addEventListener("unhandledrejection", function (event) {
    var r = event.reason;
    jsErrors.push("unhandled rejection: " + String((r && (r.message || r.requireModules)) || r));
  });

  var mathjaxDone = false, mathjaxError = null;

  function pageLoadsMathJax() {
    return Array.prototype.some.call(document.scripts, function (s) { return /mathjax/i.test(s.src); });
  }
  function watchMathJax() {
    if (!pageLoadsMathJax()) { mathjaxDone = true; return; }
    var started = Date.now();
    (function poll() {
      var mj = window.MathJax;
      if (mj && mj.startup && mj.startup.promise) {
        mj.startup.promise.then(function () { mathjaxDone = true; },
                                function (e) { mathjaxError = String(e); mathjaxDone = true; });
      } else if (Date.now() - started > LIMIT_MS) {
        mathjaxError = "MathJax did not start"; mathjaxDone = true;
      } else {
        setTimeout(poll, STEP_MS);
      }
    })();
  }

  function widgetViews() {
    return document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  }
  function renderedWidgets() {
    // libembed inserts a div.widget-subarea per view; the view's element is .jupyter-widgets.
    return Array.prototype.filter.call(document.querySelectorAll(".widget-subarea"), function (el) {
      return el.querySelector(".jupyter-widgets") !== null;
    }).length;
  }

  // The explorers (labsupport.widgets): one <div class="lab-explorer"> each, whose inline
  // script builds the controls and sets data-ready. Each control is moved through its other
  // values until the image changes (or none does), then put back: what a reader would see.
  function explorersReady() {
    return Array.prototype.every.call(document.querySelectorAll(".lab-explorer"), function (el) {
      return el.getAttribute("data-ready");
    });
  }
  function exploreEach() {
    return Array.prototype.map.call(document.querySelectorAll(".lab-explorer"), function (root) {
      var img = root.querySelector("img");
      var controls = Array.prototype.map.call(root.querySelectorAll(".lab-explorer-controls [name]"), function (c) {
        var start = c.value, before = img.getAttribute("src"), n = c.tagName === "SELECT" ? c.options.length : Number(c.max) + 1;
        var changed = false;
        for (var i = 0; i < n && !changed; i++) {
          if (String(i) === start) continue;
          c.value = String(i);
          c.dispatchEvent(new Event("input", { bubbles: true }));
          changed = img.getAttribute("src") !== before;
        }
        c.value = start;
        c.dispatchEvent(new Event("input", { bubbles: true }));
        return { name: c.name, values: n, changed: changed, restored: img.getAttribute("src") === before };
      });
      return { id: root.id, ready: root.getAttribute("data-ready") === "1", controls: controls,
               loaded: img.complete && img.naturalWidth > 0 };
    });
  }

  var SKIP = { PRE: 1, CODE: 1, SCRIPT: 1, STYLE: 1, TEXTAREA: 1, NOSCRIPT: 1, "MJX-CONTAINER": 1 };
  function proseText(root) {
    // Text outside code and typeset math: where raw TeX must not survive.
    var out = [];
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (node) {
        for (var p = node.parentNode; p && p !== root; p = p.parentNode) {
          if (SKIP[p.nodeName.toUpperCase()]) return NodeFilter.FILTER_REJECT;
        }
        return NodeFilter.FILTER_ACCEPT;
      }
    });
    while (walker.nextNode()) out.push(walker.currentNode.nodeValue);
    return out.join(" ");
  }

  function report() {
    var article = document.querySelector("article") || document.body;
    var images = Array.prototype.map.call(document.images, function (img) {
      var figure = img.closest("figure");
      var caption = figure && figure.querySelector("figcaption");
      if (caption) caption = caption.querySelector(".caption-text") || caption;  // not "Fig. 1"
      return {
        src: img.getAttribute("src"), alt: img.getAttribute("alt"),
        complete: img.complete, naturalWidth: img.naturalWidth,
        inArticle: article.contains(img),
        inWidget: img.closest(".widget-subarea") !== null,
        caption: caption ? caption.innerText.trim() : null
      };
    });
    var headings = Array.prototype.map.call(article.querySelectorAll("h1, h2, h3, h4, h5, h6"), function (h) {
      return { level: Number(h.tagName[1]), text: h.innerText.trim() };
    });
    var mathElements = document.querySelectorAll(".math");
    var untypeset = Array.prototype.filter.call(mathElements, function (el) {
      return el.querySelector("mjx-container") === null;
    }).map(function (el) { return el.textContent.trim().slice(0, 80); });
    var resources = performance.getEntriesByType("resource").map(function (e) {
      return { url: e.name, status: e.responseStatus === undefined ? null : e.responseStatus };
    });
    var fontErrors = [];
    if (document.fonts) document.fonts.forEach(function (f) { if (f.status === "error") fontErrors.push(f.family); });
    var result = {
      url: location.href,
      title: document.title,
      mathjaxLoaded: pageLoadsMathJax(),
      mathjaxError: mathjaxError,
      mathElements: mathElements.length,
      typeset: document.querySelectorAll("mjx-container").length,
      untypeset: untypeset,
      mathErrors: Array.prototype.map.call(document.querySelectorAll("mjx-merror"), function (e) { return e.textContent; }),
      proseText: proseText(article),
      visibleText: document.body.innerText,
      // printed output whose lines do not fit the page: it scrolls sideways
      wideOutputs: Array.prototype.filter.call(article.querySelectorAll(".cell_output pre"), function (el) {
        return el.scrollWidth > el.clientWidth + 1;
      }).map(function (el) { return el.textContent.slice(0, 75); }),
      widgetViews: widgetViews(),
      widgetsRendered: renderedWidgets(),
      widgets: Array.prototype.map.call(document.querySelectorAll(".widget-subarea"), function (el) {
        var view = el.querySelector(".jupyter-widgets");
        return {
          text: el.textContent.replace(/\s+/g, " ").trim().slice(0, 200),
          classes: view ? view.className : null,
          // tqdm hides a finished bar created with leave=False (layout.visibility = hidden)
          hidden: view ? getComputedStyle(view).visibility === "hidden" : null,
          height: el.getBoundingClientRect().height
        };
      }),
      images: images,
      explorers: exploreEach(),
      headings: headings,
      links: Array.prototype.map.call(document.querySelectorAll("a[href]"), function (a) { return a.href; }),
      scripts: Array.prototype.map.call(document.scripts, function (s) { return s.src; }).filter(Boolean),
      resources: resources,
      failedLoads: failedLoads,
      fontErrors: fontErrors,
      jsErrors: jsErrors
    };
    var pre = document.createElement("pre");
    pre.id = "browser-check";
    pre.hidden = true;
    pre.textContent = JSON.stringify(result);
    document.body.appendChild(pre);
    showForScreenshot(new URLSearchParams(location.search).get("view"), article);
  }

  // For screenshots (headless Chromium captures a scrolled page blank): ?view=explorer,
  // ?view=widget or ?view=math hides what comes before the first explorer (visible widget,
  // display equation) and the paragraph just before it, so that it shows at the top.
  function showForScreenshot(view, article) {
    var target = null;
    if (view === "explorer") {
      target = document.querySelector(".lab-explorer");
    } else if (view === "widget") {
      target = Array.prototype.find.call(document.querySelectorAll(".widget-subarea"), function (el) {
        var v = el.querySelector(".jupyter-widgets");
        return v && getComputedStyle(v).visibility !== "hidden";
      });
    } else if (view === "math") {
      target = document.querySelector("div.math");
    }
    if (!target) return;
    var node = target.closest(".cell") || target;
    var keep = node.previousElementSibling;
    for (; node && node !== article; node = node.parentElement) {
      for (var sib = node.previousElementSibling; sib; sib = sib.previousElementSibling) {
        if (sib !== keep) sib.style.display = "none";
      }
    }
    window.scrollTo(0, 0);
  }

  window.addEventListener("load", function () {
    watchMathJax();
    var started = Date.now();
    (function wait() {
      var imagesDone = Array.prototype.every.call(document.images, function (i) { return i.complete; });
      var widgetsDone = renderedWidgets() >= widgetViews() && explorersReady();
      if ((mathjaxDone && widgetsDone && imagesDone) || Date.now() - started > LIMIT_MS) {
        // One more beat so fonts requested by the last render are settled.
        setTimeout(report, 500);
      } else {
        setTimeout(wait, STEP_MS);
      }
    })();
  });
})();
