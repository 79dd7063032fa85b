// The case browser of an assay HTML report: filters the work items and opens one.
// Everything shown comes from the bundle, so it is only ever set as text (textContent), never as markup.
(function () {
  "use strict";
  var source = document.getElementById("assay-cases");
  if (!source) { return; }
  var data = JSON.parse(source.textContent);
  // Long texts many work items share are written once, as {"$": index} into data.strings: put them back.
  function expand(value) {
    if (Array.isArray(value)) { return value.map(expand); }
    if (value && typeof value === "object") {
      var keys = Object.keys(value);
      if (keys.length === 1 && keys[0] === "$" && typeof value.$ === "number") { return data.strings[value.$]; }
      if (keys.length === 1 && keys[0] === "$raw") {  // the bundle's own one-member object, kept as it was
        var inner = {};
        Object.keys(value.$raw).forEach(function (k) { inner[k] = expand(value.$raw[k]); });
        return inner;
      }
      var copy = {};
      keys.forEach(function (k) { copy[k] = expand(value[k]); });
      return copy;
    }
    return value;
  }
  var entries = data.entries.map(expand);
  var LIMIT = 200;
  var shown = LIMIT;
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (className) { node.className = className; }
    return node;
  }

  function fill(select, values) {
    values.forEach(function (value) { select.appendChild(el("option", value)).value = value; });
  }

  function distinct(key) {
    var seen = {};
    entries.forEach(function (e) { seen[e[key]] = true; });
    return Object.keys(seen).sort();
  }

  var outcomeNames = {};
  entries.forEach(function (e) { Object.keys(e.outcomes).forEach(function (k) { outcomeNames[k] = true; }); });
  fill($("cb-endpoint"), distinct("endpoint"));
  fill($("cb-condition"), distinct("condition"));
  fill($("cb-family"), distinct("family"));
  fill($("cb-outcome"), Object.keys(outcomeNames).sort());

  function verdict(value) {
    if (value === true) { return "yes"; }
    if (value === false) { return "no"; }
    return value === undefined ? "" : String(value);
  }

  function matches(e) {
    var endpoint = $("cb-endpoint").value, condition = $("cb-condition").value, family = $("cb-family").value;
    var outcome = $("cb-outcome").value, value = $("cb-value").value, text = $("cb-text").value.toLowerCase();
    if (endpoint && e.endpoint !== endpoint) { return false; }
    if (condition && e.condition !== condition) { return false; }
    if (family && e.family !== family) { return false; }
    if (outcome) {
      var v = e.outcomes[outcome];
      if (value === "errors") { return e.errors.length > 0; }
      if (value === "yes" && v !== true) { return false; }
      if (value === "no" && v !== false) { return false; }
      if (value === "" && v === undefined) { return false; }
    } else if (value === "errors" && e.errors.length === 0) { return false; }
    if (text && e["case"].toLowerCase().indexOf(text) < 0) { return false; }
    return true;
  }

  function render() {
    var body = $("cb-rows");
    body.textContent = "";
    var outcome = $("cb-outcome").value;
    var found = entries.filter(matches);
    found.slice(0, shown).forEach(function (e) {
      var row = el("tr");
      row.dataset.n = e.n;
      [e["case"], e.endpoint, e.condition, e.seed, e.family,
       outcome ? verdict(e.outcomes[outcome]) : Object.keys(e.outcomes).filter(function (k) {
         return e.outcomes[k] === true;
       }).join(", "),
       e.errors.length ? e.errors.length + " error(s)" : ""].forEach(function (cell) {
        row.appendChild(el("td", cell));
      });
      row.tabIndex = 0;
      row.addEventListener("click", function () { open(e); });
      row.addEventListener("keydown", function (event) { if (event.key === "Enter") { open(e); } });
      body.appendChild(row);
    });
    $("cb-count").textContent = "Showing " + Math.min(shown, found.length) + " of " + found.length +
      " work items (" + entries.length + " in the bundle)";
    $("cb-more").hidden = found.length <= shown;
  }

  function block(parent, title, text) {
    parent.appendChild(el("h4", title));
    parent.appendChild(el("pre", text));
  }

  function open(e) {
    var detail = $("cb-detail");
    detail.textContent = "";
    detail.appendChild(el("h3", e["case"] + " / " + e.endpoint + " / " + e.condition +
      " / seed " + e.seed + " / epoch " + e.epoch));
    var list = el("dl");
    Object.keys(e.outcomes).sort().forEach(function (k) {
      list.appendChild(el("dt", k));
      list.appendChild(el("dd", verdict(e.outcomes[k])));
    });
    detail.appendChild(list);
    if (e.errors.length) { block(detail, "Errors", JSON.stringify(e.errors, null, 2)); }
    if (e.detail.final_output !== null && e.detail.final_output !== undefined) {
      block(detail, "Final output", e.detail.final_output);
    }
    var transcript = el("div", null, "transcript");
    transcript.appendChild(el("h4", "Transcript"));
    (e.detail.messages || []).forEach(function (m) {
      var turn = el("div", null, "turn turn-" + String(m.role));
      turn.appendChild(el("div", (m.where === "row" ? "" : m.where + ": ") + String(m.role) +
        (m.name ? " (" + m.name + ")" : ""), "role"));
      var content = m.content === null || m.content === undefined ? "" : m.content;
      turn.appendChild(el("pre", typeof content === "string" ? content : JSON.stringify(content, null, 2)));
      if (m.tool_calls) { turn.appendChild(el("pre", "tool calls: " + JSON.stringify(m.tool_calls, null, 2))); }
      transcript.appendChild(turn);
    });
    if (!(e.detail.messages || []).length) { transcript.appendChild(el("p", "No transcript was recorded.")); }
    detail.appendChild(transcript);
    if ((e.detail.tool_calls || []).length) {
      block(detail, "Tool calls", JSON.stringify(e.detail.tool_calls, null, 2));
    }
    Object.keys(e.detail.stages || {}).sort().forEach(function (stage) {
      block(detail, "Stage " + stage + " (verdicts, state diff, oracle results, rationale, labels)",
        JSON.stringify(e.detail.stages[stage], null, 2));
    });
    detail.hidden = false;
    detail.scrollIntoView();
  }

  ["cb-endpoint", "cb-condition", "cb-family", "cb-outcome", "cb-value"].forEach(function (id) {
    $(id).addEventListener("change", function () { shown = LIMIT; render(); });
  });
  $("cb-text").addEventListener("input", function () { shown = LIMIT; render(); });
  $("cb-more").addEventListener("click", function () { shown += LIMIT; render(); });
  render();
}());
