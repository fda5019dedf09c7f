// iws teleop page: draws the frames the server streams, sends held keys / gamepad axes,
// acknowledges every drawn frame (the server's "frames shown/s" and latency come from these).
"use strict";

const $ = (id) => document.getElementById(id);
// The launch's secret token came in this page's address (the one `iws teleop` printed); the
// tab id is this tab's own, kept across reloads so a reconnecting tab gets its role back.
const secret = new URLSearchParams(location.search).get("token") || "";
const tab = sessionStorage.getItem("iws-teleop-tab") ||
  (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
sessionStorage.setItem("iws-teleop-tab", tab);

const ui = { ws: null, hello: null, role: "watcher", views: {}, keys: new Set(), axes: [],
             recording: null, lastSeq: 0, drawing: Promise.resolve(), padButtons: [] };

function log(text, cls) {
  const li = document.createElement("li");
  li.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  if (cls) li.className = cls;
  $("log").prepend(li);
  while ($("log").children.length > 30) $("log").lastChild.remove();
}

function send(message) {
  if (ui.ws && ui.ws.readyState === WebSocket.OPEN) ui.ws.send(JSON.stringify(message));
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const query = `token=${encodeURIComponent(secret)}&tab=${encodeURIComponent(tab)}`;
  const ws = new WebSocket(`${scheme}://${location.host}/ws?${query}`);
  ws.binaryType = "arraybuffer";
  ws.onopen = () => { $("conn").textContent = "connected"; $("conn").className = "badge on"; };
  ws.onmessage = (event) => {
    if (typeof event.data === "string") onJson(JSON.parse(event.data));
    else onFrame(event.data);
  };
  ws.onclose = () => {
    // Never connected: no or a stale token (each launch has a new one; see its printed address).
    $("conn").textContent = ui.hello ? "reconnecting…"
      : "not connected: open the address iws teleop printed";
    $("conn").className = "badge off";
    setTimeout(connect, 1000);
  };
  ui.ws = ws;
}

// ---- server messages -------------------------------------------------------------------------
function onJson(msg) {
  switch (msg.type) {
    case "hello": onHello(msg); break;
    case "role": setRole(msg.role); break;
    case "stats": showStats(msg); break;
    case "saved":
      $("saved").textContent = `saved ${msg.episode_id} (${msg.length} steps) as #${msg.index}; ` +
        `${msg.count} this session`;
      log(`saved ${msg.episode_id}: ${msg.length} steps → episode #${msg.index}`);
      break;
    case "info": log(msg.message); break;
    case "error": log(msg.message, "error"); break;
  }
}

function onHello(msg) {
  ui.hello = msg;
  $("model").textContent = `${msg.model} · ${msg.init.name} (${msg.init.episodes} episodes)`;
  $("target-fps").textContent = msg.tick_fps;
  $("reset-episode").max = msg.init.episodes - 1;
  if (msg.task && !$("task").value) $("task").value = msg.task;
  buildViews(msg.features.cameras);
  buildAction(msg.features);
  buildLegend(msg.mapping);
  setRole(msg.role);
  if (!msg.record_to) {
    $("rec-status").textContent = "recording off (start with --record-to PATH)";
    $("rec-start").disabled = true;
  }
  showStatus(msg.status);
}

function buildViews(cameras) {
  const box = $("views");
  box.innerHTML = "";
  ui.views = {};
  // One row of views (two arms' cameras side by side): up to 384 px a view, less when the
  // window is too narrow for the row (the controls then wrap below it).
  const room = (Math.max(window.innerWidth, 320) - 48) / cameras.length - 12;
  const budget = Math.min(384, room);
  for (const cam of cameras) {
    const scale = Math.max(1, Math.floor(budget / Math.max(cam.height, cam.width)));
    const fig = document.createElement("figure");
    const canvas = document.createElement("canvas");
    canvas.width = cam.width * scale; canvas.height = cam.height * scale;
    canvas.id = `view-${cam.name}`;
    const cap = document.createElement("figcaption");
    cap.textContent = `${cam.name} · ${cam.width}×${cam.height}`;
    fig.append(canvas, cap);
    box.append(fig);
    ui.views[cam.name] = canvas;
  }
}

function buildAction(features) {
  const box = $("action");
  box.innerHTML = "";
  for (let d = 0; d < features.action_dim; d++) {
    const row = document.createElement("div");
    row.className = "dim";
    row.innerHTML = `<span class="muted"></span><span class="value" id="action-${d}">–</span>` +
      `<div class="bar"><i id="action-bar-${d}"></i></div>`;
    row.firstChild.textContent = features.action_names[d] || `a${d}`;
    box.append(row);
  }
}

function buildLegend(mapping) {
  const list = $("legend");
  list.innerHTML = "";
  const kbd = (keys) => keys.map((k) => `<kbd>${k}</kbd>`).join(" ");
  for (const axis of mapping.axes) {
    const li = document.createElement("li");
    const stick = axis.gamepad_axis === null ? "" : ` · gamepad axis ${axis.gamepad_axis}`;
    li.innerHTML = `<b></b>: ${kbd(axis.minus)} − / + ${kbd(axis.plus)}${stick}`;
    li.firstChild.textContent = axis.name;
    list.append(li);
  }
  const extra = document.createElement("li");
  extra.innerHTML = `${kbd(mapping.fine_keys)} fine · <kbd>Space</kbd> record/stop · ` +
    `gamepad Start record/stop, Back discard`;
  list.append(extra);
}

function setRole(role) {
  ui.role = role;
  $("role").textContent = role === "controller" ? "controlling" : "watching";
  $("role").className = `badge ${role}`;
  $("take-control").hidden = role === "controller";
  for (const id of ["rec-start", "rec-stop", "rec-discard", "reset", "reset-random"]) {
    $(id).dataset.watcher = role === "controller" ? "" : "1";
  }
  updateButtons();
}

function showStats(s) {
  $("sim-fps").textContent = s.sim_fps.toFixed(1);
  $("delivered-fps").textContent = s.delivered_fps.toFixed(1);
  $("latency").textContent = s.latency_ms === null ? "–" : `${s.latency_ms.toFixed(0)} ms`;
  $("dropped").textContent = s.dropped_ticks;
  $("clients").textContent = s.clients;
}

function showStatus(st) {
  const f = ui.hello.features;
  st.action.forEach((a, d) => {
    $(`action-${d}`).textContent = a.toFixed(1);
    if (f.action_low && f.action_high) {
      const u = (a - f.action_low[d]) / (f.action_high[d] - f.action_low[d]);
      $(`action-bar-${d}`).style.left = `calc(${(100 * u).toFixed(1)}% - 2px)`;
    }
  });
  if (st.state) {
    $("state-box").hidden = false;
    $("state").textContent = st.state.map((s) => s.toFixed(1)).join(", ");
  }
  $("step").textContent = st.step;
  ui.recording = st.recording;
  const rec = st.recording;
  $("rec-status").className = rec ? "active" : "muted";
  if (rec) {
    const max = st.max_steps ? ` / ${st.max_steps}` : "";
    $("rec-status").textContent = `● REC ${rec.episode_id}: ${rec.steps}${max} steps`;
  } else if (ui.hello.record_to) {
    $("rec-status").textContent = "not recording";
  }
  $("rec-status").dataset.steps = rec ? rec.steps : "";
  for (const canvas of Object.values(ui.views)) canvas.classList.toggle("recording", !!rec);
  updateButtons();
}

function updateButtons() {
  const watcher = ui.role !== "controller";
  const canRecord = ui.hello && ui.hello.record_to;
  $("rec-start").disabled = watcher || !canRecord || !!ui.recording;
  $("rec-stop").disabled = watcher || !ui.recording;
  $("rec-discard").disabled = watcher || !ui.recording;
  $("reset").disabled = $("reset-random").disabled = watcher || !!ui.recording;
}

// ---- frames ----------------------------------------------------------------------------------
function onFrame(buffer) {
  const n = new DataView(buffer).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, n)));
  let offset = 4 + n;
  const parts = header.images.map((img) => {
    const blob = new Blob([new Uint8Array(buffer, offset, img.size)], { type: img.mime });
    offset += img.size;
    return [img.camera, blob];
  });
  // Draw in arrival order; ack only once the frame is on screen.
  ui.drawing = ui.drawing.then(async () => {
    const bitmaps = await Promise.all(parts.map(([, blob]) => createImageBitmap(blob)));
    parts.forEach(([camera], i) => draw(camera, bitmaps[i], header));
    ui.lastSeq = header.seq;
    $("step").dataset.seq = header.seq;
    showStatus(header);
    send({ type: "ack", seq: header.seq });
  }).catch((err) => log(`frame ${header.seq}: ${err}`, "error"));
}

function draw(camera, bitmap, header) {
  const canvas = ui.views[camera];
  if (!canvas) return;
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  const cursor = ui.hello.mapping.cursor;
  const f = ui.hello.features;
  if (!cursor || cursor.camera !== camera || !f.action_low) return;
  const u = (header.action[cursor.x] - f.action_low[cursor.x]) / (f.action_high[cursor.x] - f.action_low[cursor.x]);
  const v = (header.action[cursor.y] - f.action_low[cursor.y]) / (f.action_high[cursor.y] - f.action_low[cursor.y]);
  const x = u * canvas.width, y = v * canvas.height;
  ctx.strokeStyle = ui.recording ? "#e5484d" : "#4f8cff";
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.moveTo(x - 10, y); ctx.lineTo(x + 10, y); ctx.moveTo(x, y - 10); ctx.lineTo(x, y + 10);
  ctx.stroke();
}

// ---- input -----------------------------------------------------------------------------------
function sendInput() {
  if (ui.role === "controller") send({ type: "input", keys: [...ui.keys], axes: ui.axes });
}

function typing(event) {
  const tag = event.target && event.target.tagName;
  return tag === "INPUT" || tag === "TEXTAREA";
}

function toggleRecording() {
  if (ui.role !== "controller" || !ui.hello || !ui.hello.record_to) return;
  if (ui.recording) send({ type: "record", action: "stop" });
  else send({ type: "record", action: "start", task: $("task").value });
}

window.addEventListener("keydown", (event) => {
  if (typing(event) || !ui.hello) return;
  const codes = ui.hello.mapping.codes;
  if (event.code === "Space" && !codes.includes("Space")) {
    event.preventDefault();
    if (!event.repeat) toggleRecording();
    return;
  }
  if (!codes.includes(event.code)) return;
  event.preventDefault();
  if (!ui.keys.has(event.code)) { ui.keys.add(event.code); sendInput(); }
});
window.addEventListener("keyup", (event) => {
  if (ui.keys.delete(event.code)) sendInput();
});
window.addEventListener("blur", () => { ui.keys.clear(); sendInput(); });

function pollGamepad() {
  const pads = navigator.getGamepads ? [...navigator.getGamepads()].filter(Boolean) : [];
  if (pads.length) {
    const pad = pads[0];
    const axes = pad.axes.map((a) => Math.round(a * 100) / 100);
    if (axes.join() !== ui.axes.join()) { ui.axes = axes; sendInput(); }
    const pressed = pad.buttons.map((b) => b.pressed);
    if (pressed[9] && !ui.padButtons[9]) toggleRecording();
    if (pressed[8] && !ui.padButtons[8] && ui.recording) send({ type: "record", action: "discard" });
    ui.padButtons = pressed;
  }
  requestAnimationFrame(pollGamepad);
}

// ---- buttons ---------------------------------------------------------------------------------
function onClick(id, handler) {
  // Blur after a click so Space/arrows go to the simulation, not to the focused button.
  $(id).addEventListener("click", (event) => { event.currentTarget.blur(); handler(); });
}
onClick("rec-start", () => send({ type: "record", action: "start", task: $("task").value }));
onClick("rec-stop", () => send({ type: "record", action: "stop" }));
onClick("rec-discard", () => send({ type: "record", action: "discard" }));
onClick("reset", () => send({ type: "reset", episode: Number($("reset-episode").value),
                             frame: Number($("reset-frame").value) }));
onClick("reset-random", () => send({ type: "reset", episode: null, frame: 0 }));
onClick("take-control", () => send({ type: "take_control" }));

connect();
requestAnimationFrame(pollGamepad);
