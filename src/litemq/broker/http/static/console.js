// LiteMQ web console: polls the broker's JSON endpoints and renders tables and SVG charts.
// Vanilla JS, no external resources. Query parameters: topic, partition, offset, timestamp, max
// (open the message browser there), refresh_ms (polling period, default 3000).
"use strict";

const params = new URLSearchParams(window.location.search);
const REFRESH_MS = Math.max(500, parseInt(params.get("refresh_ms") || "3000", 10) || 3000);
const MAX_SAMPLES = 90;
const state = { overview: null, samples: [], rates: [], nextOffset: null, browserStarted: false };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return node;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function fmtBytes(n) {
  if (n == null || isNaN(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? Math.round(n) : n.toFixed(1)) + " " + units[i];
}

function fmtNum(n) {
  if (n == null || isNaN(n)) return "–";
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString("en");
  return Number.isInteger(n) ? String(n) : String(Number(n.toPrecision(2)));
}

async function getJSON(url) {
  const resp = await fetch(url, { cache: "no-store" });
  const body = await resp.json();
  if (!resp.ok) throw new Error(body.message || resp.statusText);
  return body;
}

function setStatus(text, bad) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.style.color = bad ? "#ffb4ad" : "";
}

// ---------------------------------------------------------------- overview
async function refreshOverview() {
  const ov = await getJSON("/console/api/overview");
  state.overview = ov;
  document.getElementById("cluster-line").textContent =
    `cluster ${ov.cluster_id} · ${ov.brokers.length} broker(s) · controller ${ov.controller} · served by broker ${ov.node_id}`;
  renderBrokers(ov);
  const linked = params.get("topic");
  if (!state.browserStarted && ov.topics.some(t => t.name === linked && t.internal)) {
    document.getElementById("show-internal").checked = true;  // a link to an internal topic shows them
  }
  renderTopics(ov);
  await renderGroups(ov);
  fillBrowserChoices(ov);
  document.body.dataset.overviewLoaded = "1";
}

function renderBrokers(ov) {
  fill(document.querySelector("#brokers tbody"), ov.brokers.map(b => el("tr", {},
    el("td", { class: "num" }, b.broker_id), el("td", {}, `${b.host}:${b.port}`), el("td", {}, b.rack || "–"),
    el("td", { class: b.live ? "live" : "dead" }, b.live ? "live" : "down"),
    el("td", {}, b.quorum_role || ""),
    el("td", {}, b.controller ? "controller" : ""))));
}

// ---------------------------------------------------------------- reassignments
function emptyRow(columns, text) {
  return el("tr", {}, el("td", { class: "empty", colspan: String(columns) }, text));
}

function catchUpText(m) {
  if (!m.adding_replicas.length) return "nothing to copy";
  if (!m.progress) return "leader did not answer";
  return m.progress.replicas.map(r => r.state === "pending" ? `${r.replica}: not added yet` :
    `${r.replica}: ${r.caught_up_offset} / ${m.progress.log_end_offset} (${r.state}, lag ${r.lag})`).join("; ");
}

function fmtRate(n) {
  return n == null ? "–" : fmtBytes(n) + "/s";
}

async function refreshReassignments() {
  const r = await getJSON("/console/api/reassignments");
  const moves = r.reassignments;
  fill(document.querySelector("#reassignments tbody"), moves.length ? moves.map(m => el("tr", {},
    el("td", {}, m.topic), el("td", { class: "num" }, m.partition),
    el("td", { class: m.leader >= 0 ? "" : "dead" }, m.leader >= 0 ? m.leader : "none"),
    el("td", {}, m.replicas.join(", ")), el("td", {}, m.target.join(", ")),
    el("td", {}, m.adding_replicas.join(", ")), el("td", {}, m.removing_replicas.join(", ")),
    el("td", {}, catchUpText(m)))) :
    [emptyRow(8, r.error_code ? "not authorized to list reassignments (DESCRIBE on the cluster)"
      : "No partition reassignment in progress.")]);
  const t = r.throttles;
  const rows = t.brokers.map(b => el("tr", {}, el("td", {}, `broker ${b.broker_id}`),
    el("td", {}, fmtRate(b.leader_rate_bytes_per_s)), el("td", {}, fmtRate(b.follower_rate_bytes_per_s))))
    .concat(t.topics.map(x => el("tr", {}, el("td", {}, `topic ${x.topic} (throttled replicas)`),
      el("td", {}, x.leader_replicas || "–"), el("td", {}, x.follower_replicas || "–"))));
  fill(document.querySelector("#throttles tbody"), rows.length ? rows : [emptyRow(3, "No replication throttle set.")]);
  document.body.dataset.reassignmentsLoaded = "1";
}

function visibleTopics(ov) {
  const internal = document.getElementById("show-internal").checked;
  return ov.topics.filter(t => internal || !t.internal);
}

function topicRate(name, kind) {
  const last = state.rates[state.rates.length - 1];
  return last && last.topics[name] ? last.topics[name][kind] : null;
}

function renderTopics(ov) {
  const topics = visibleTopics(ov);
  fill(document.querySelector("#topics tbody"), topics.map(t => el("tr", { class: "clickable", onclick: () => browse(t.name, 0) },
    el("td", {}, t.name), el("td", { class: "num" }, t.partitions.length), el("td", { class: "num" }, t.replication_factor),
    el("td", { class: "num" }, fmtNum(t.messages)), el("td", { class: "num" }, fmtBytes(topicRate(t.name, "bytes_in"))),
    el("td", { class: "num" }, fmtBytes(topicRate(t.name, "bytes_out"))))));
  const rows = [];
  for (const t of topics) {
    for (const p of t.partitions) {
      rows.push(el("tr", { class: "clickable", onclick: () => browse(t.name, p.partition) },
        el("td", {}, t.name), el("td", { class: "num" }, p.partition),
        el("td", { class: p.leader >= 0 ? "" : "dead" }, p.leader >= 0 ? p.leader : "none"),
        el("td", {}, p.replicas.join(", ")), el("td", {}, p.isr.join(", ")),
        el("td", { class: "num" }, p.log_start_offset), el("td", { class: "num" }, p.high_watermark),
        el("td", { class: "num" }, fmtNum(p.messages))));
    }
  }
  fill(document.querySelector("#partitions tbody"), rows);
}

async function renderGroups(ov) {
  fill(document.querySelector("#groups tbody"), ov.groups.map(g => el("tr", {},
    el("td", {}, g.group_id), el("td", {}, g.state), el("td", { class: "num" }, g.members),
    el("td", { class: "num" }, g.coordinator), el("td", { class: "num" + (g.lag > 0 ? " lag-high" : "") }, fmtNum(g.lag)))));
  const details = await Promise.all(ov.groups.slice(0, 50).map(g =>
    getJSON("/console/api/groups/" + encodeURIComponent(g.group_id)).catch(() => null)));
  const rows = [];
  for (const d of details) {
    if (!d) continue;
    for (const o of d.offsets) {
      rows.push(el("tr", {},
        el("td", {}, d.group_id), el("td", {}, o.topic), el("td", { class: "num" }, o.partition),
        el("td", { class: "num" }, o.in_flight === undefined ? o.current_offset
          : `${o.current_offset} (${o.in_flight} in flight, ${o.acquired} acquired)`),
        el("td", { class: "num" }, o.log_end_offset),
        el("td", { class: "num" + (o.lag > 0 ? " lag-high" : "") }, o.lag < 0 ? "?" : o.lag),
        el("td", {}, o.client_id ? `${o.client_id} (${o.consumer_id.slice(0, 24)})` : "")));
    }
  }
  fill(document.querySelector("#lags tbody"), rows);
}

// ---------------------------------------------------------------- throughput
async function refreshThroughput() {
  const s = await getJSON("/console/api/throughput");
  state.samples.push(s);
  if (state.samples.length > MAX_SAMPLES) state.samples.shift();
  // rates from the broker: per broker over its last 10 s, so a broker that is missing from a
  // sample, rejoins or restarts is neither a spike nor a drop to zero (console.py counter_rates)
  if (s.rates) {
    state.rates.push({ t: s.time_ms, bytes_in: s.rates.bytes_in, bytes_out: s.rates.bytes_out,
                       messages_in: s.rates.messages_in, topics: s.rates.topics });
    if (state.rates.length > MAX_SAMPLES) state.rates.shift();
  }
  drawChart(document.getElementById("chart-bytes"), [
    { name: "in", key: "bytes_in" }, { name: "out", key: "bytes_out" }], fmtBytes, BYTES_AXIS);
  drawChart(document.getElementById("chart-messages"), [{ name: "messages in", key: "messages_in" }], fmtNum,
    COUNT_AXIS);
  document.body.dataset.throughputSamples = String(state.samples.length);
}

const SVG_NS = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const n = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  if (text != null) n.textContent = text;
  return n;
}

// y-axis scales: values of `base`-sized units (bytes in KiB, MiB, ...; counts as they are), an
// idle chart still spans 0..`min` so its ticks are distinct
const BYTES_AXIS = { base: 1024, units: ["B", "KiB", "MiB", "GiB", "TiB"], min: 1024 };
const COUNT_AXIS = { base: 0, units: [""], min: 4 };

function decimalsOf(step) {
  let d = 0;
  while (d < 6 && Math.abs(step * 10 ** d - Math.round(step * 10 ** d)) > 1e-9) d++;
  return d;
}

// About `count` evenly spaced ticks from 0 to at least `max`: the step is 1, 2, 2.5 or 5 times a
// power of ten of the axis unit, labelled in one unit with the decimals the step needs.
function axisTicks(max, axis, count = 4) {
  max = Math.max(max, axis.min);
  let u = 0;
  while (axis.base && u < axis.units.length - 1 && max >= axis.base ** (u + 1)) u++;
  const scale = axis.base ? axis.base ** u : 1;
  const raw = max / scale / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].find(f => f * mag >= raw * (1 - 1e-9)) * mag;
  const n = Math.ceil(max / scale / step - 1e-9);
  const d = decimalsOf(step);
  const unit = axis.units[u] ? " " + axis.units[u] : "";
  return Array.from({ length: n + 1 }, (_, i) => ({
    value: i * step * scale,
    label: (i === 0 ? "0" + (axis.base ? " " + axis.units[0] : "") :
      (i * step).toLocaleString("en", { minimumFractionDigits: d, maximumFractionDigits: d }) + unit),
  }));
}

function drawChart(svg, series, fmt, axis) {
  const W = 520, H = 180, L = 64, R = 10, T = 22, B = 22;
  const pts = state.rates;
  const nodes = [];
  let peak = 0;
  for (const s of series) for (const p of pts) peak = Math.max(peak, p[s.key]);
  const ticks = axisTicks(peak * 1.05, axis);
  const max = ticks[ticks.length - 1].value;
  for (const tick of ticks) {
    const y = T + (H - T - B) * (1 - tick.value / max);
    nodes.push(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: y, y2: y }));
    nodes.push(svgEl("text", { class: "tick", x: L - 4, y: y + 3, "text-anchor": "end" }, tick.label));
  }
  nodes.push(svgEl("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  nodes.push(svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  if (pts.length >= 1) {
    const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1);
    const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
    const y = v => T + (H - T - B) * (1 - v / max);
    series.forEach((s, i) => {
      const d = pts.map(p => `${x(p.t).toFixed(1)},${y(p[s.key]).toFixed(1)}`).join(" ");
      nodes.push(svgEl(pts.length > 1 ? "polyline" : "circle",
        pts.length > 1 ? { class: "s" + i, points: d } : { class: "s" + i, cx: x(pts[0].t), cy: y(pts[0][s.key]), r: 2 }));
    });
    nodes.push(svgEl("text", { x: L, y: H - 6 }, new Date(t0).toLocaleTimeString()));
    nodes.push(svgEl("text", { x: W - R, y: H - 6, "text-anchor": "end" }, new Date(t1).toLocaleTimeString()));
  } else {
    nodes.push(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "collecting samples…"));
  }
  series.forEach((s, i) => {
    const last = pts.length ? pts[pts.length - 1][s.key] : null;
    nodes.push(svgEl("rect", { class: "legend" + i, x: L + 8 + i * 150, y: 6, width: 10, height: 10 }));
    nodes.push(svgEl("text", { x: L + 22 + i * 150, y: 15 }, `${s.name}: ${last == null ? "–" : fmt(last)}/s`));
  });
  svg.replaceChildren(...nodes);
}

// ---------------------------------------------------------------- message browser
// The browser offers the topics the table shows (internal ones only when "internal topics" is
// ticked, which a link naming an internal topic does), keeping the chosen one while it is listed.
function fillBrowserChoices(ov) {
  const tsel = document.getElementById("b-topic");
  const current = tsel.value || params.get("topic") || "";
  const names = visibleTopics(ov).map(t => t.name);
  if (tsel.options.length !== names.length || [...tsel.options].some((o, i) => o.value !== names[i])) {
    tsel.replaceChildren(...names.map(n => el("option", { value: n }, n)));
  }
  if (names.includes(current)) tsel.value = current;
  if (tsel.value !== current && current) {
    fill(document.querySelector("#messages tbody"), []);
    document.getElementById("b-info").textContent = "";
    document.getElementById("b-next").disabled = true;
  }
  document.body.dataset.browserTopic = tsel.value;
  fillPartitions();
}

function fillPartitions() {
  const ov = state.overview;
  if (!ov) return;
  const t = ov.topics.find(x => x.name === document.getElementById("b-topic").value);
  const psel = document.getElementById("b-partition");
  const want = psel.value || params.get("partition") || "0";
  const count = t ? t.partitions.length : 0;
  if (psel.options.length !== count) {
    psel.replaceChildren(...Array.from({ length: count }, (_, i) => el("option", { value: String(i) }, String(i))));
  }
  if (Number(want) < count) psel.value = want;
}

function browse(topic, partition) {
  document.getElementById("b-topic").value = topic;
  fillPartitions();
  document.getElementById("b-partition").value = String(partition);
  document.getElementById("b-mode").value = "offset";
  document.getElementById("b-from").value = "";
  loadMessages(null);
  document.getElementById("browser-section").scrollIntoView();
}

async function refreshSchemas() {
  const res = await getJSON("/console/api/schemas");
  document.getElementById("schemas-info").textContent =
    `Schema registry on this port (Confluent's API): global compatibility ${res.compatibility}`;
  fill(document.querySelector("#schemas tbody"), res.subjects.length ? res.subjects.map(s => el("tr", {},
    el("td", {}, s.subject), el("td", { class: "num" }, s.versions), el("td", { class: "num" }, s.latest),
    el("td", { class: "num" }, s.id), el("td", {}, s.type), el("td", {}, s.compatibility)))
    : [emptyRow(6, "No schema registered.")]);
  document.body.dataset.schemasLoaded = "1";
}

function renderData(d) {
  if (!d) return el("span", { class: "muted" }, "null");
  if (d.type === "AVRO" || d.type === "JSONSCHEMA") return `${JSON.stringify(d.data)} (schema ${d.schema_id})`;
  if (d.type === "JSON") return JSON.stringify(d.data);
  if (d.type === "BINARY") return "base64:" + d.data;
  return d.data;
}

function headerText(h) {
  if (h.value == null) return `${h.name}=null`;
  try { return `${h.name}=${atob(h.value)}`; } catch (e) { return `${h.name}=base64:${h.value}`; }
}

async function loadMessages(offset) {
  const ov = state.overview;
  const topic = document.getElementById("b-topic").value;
  const partition = document.getElementById("b-partition").value || "0";
  if (!ov || !topic) return;
  const max = Math.min(1000, Math.max(1, parseInt(document.getElementById("b-max").value, 10) || 50));
  const q = new URLSearchParams({ max_count: String(max), format: "schema" });
  const from = document.getElementById("b-from").value.trim();
  if (offset != null) q.set("offset", String(offset));
  else if (from !== "" && document.getElementById("b-mode").value === "timestamp") {
    const ms = /^\d+$/.test(from) ? Number(from) : Date.parse(from);
    if (isNaN(ms)) { document.getElementById("b-info").textContent = "not a timestamp: " + from; return; }
    q.set("timestamp", String(ms));
  } else if (from !== "") q.set("offset", from);
  const url = `/v3/clusters/${encodeURIComponent(ov.cluster_id)}/topics/${encodeURIComponent(topic)}/partitions/${partition}/records?${q}`;
  const info = document.getElementById("b-info");
  try {
    const res = await getJSON(url);
    fill(document.querySelector("#messages tbody"), res.data.map(r => el("tr", {},
      el("td", { class: "num" }, r.offset), el("td", {}, r.timestamp),
      el("td", {}, renderData(r.key)), el("td", {}, renderData(r.value)),
      el("td", {}, r.headers.map(headerText).join(", ")))));
    state.nextOffset = res.next_offset;
    document.getElementById("b-next").disabled = res.next_offset >= res.high_watermark;
    info.textContent = `${topic}-${partition}: ${res.data.length} record(s); log start ${res.log_start_offset}, ` +
      `high watermark ${res.high_watermark}, next offset ${res.next_offset}`;
    document.body.dataset.messagesLoaded = "1";
  } catch (e) {
    info.textContent = "cannot read: " + e.message;
  }
}

// ---------------------------------------------------------------- wiring
async function tick() {
  try {
    await refreshThroughput();
    await refreshOverview();
    await refreshReassignments();
    await refreshSchemas();
    setStatus("updated " + new Date().toLocaleTimeString(), false);
    if (!state.browserStarted && params.get("topic")) {
      state.browserStarted = true;
      if (params.get("timestamp")) {
        document.getElementById("b-mode").value = "timestamp";
        document.getElementById("b-from").value = params.get("timestamp");
      } else if (params.get("offset")) {
        document.getElementById("b-from").value = params.get("offset");
      }
      if (params.get("max")) document.getElementById("b-max").value = params.get("max");
      await loadMessages(null);
    }
  } catch (e) {
    setStatus("broker unreachable: " + e.message, true);
  }
  setTimeout(tick, REFRESH_MS);
}

document.getElementById("browse-form").addEventListener("submit", ev => { ev.preventDefault(); loadMessages(null); });
document.getElementById("b-next").addEventListener("click", () => loadMessages(state.nextOffset));
document.getElementById("b-topic").addEventListener("change", ev => {
  document.body.dataset.browserTopic = ev.target.value;
  fillPartitions();
});
document.getElementById("show-internal").addEventListener("change", () => {
  if (!state.overview) return;
  renderTopics(state.overview);
  fillBrowserChoices(state.overview);
});
tick();
