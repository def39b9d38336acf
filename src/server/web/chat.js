// qwenrt's chat page: talks to the server it came from through /v1/chat/completions (streamed
// server-sent events), keeps the conversation in memory and the settings in localStorage. Text from
// the model is only ever set as textContent (never parsed as HTML).
"use strict";

const $ = (id) => document.getElementById(id);
const SETTINGS = ["system-prompt", "temperature", "top-p", "top-k", "min-p", "max-tokens", "seed", "thinking", "tools", "api-key"];

let history = [];       // the conversation, OpenAI messages
let controller = null;  // the AbortController of the answer streaming now

function loadSettings() {
  for (const id of SETTINGS) {
    const v = localStorage.getItem("qwenrt." + id);
    if (v === null) continue;
    if ($(id).type === "checkbox") $(id).checked = v === "true";
    else $(id).value = v;
  }
}

function saveSetting(id) {
  const el = $(id);
  localStorage.setItem("qwenrt." + id, el.type === "checkbox" ? String(el.checked) : el.value);
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function setStatus(text) { $("status").textContent = text; }

function scrollDown() { const m = $("messages"); m.scrollTop = m.scrollHeight; }

function addUserMessage(text) {
  const div = document.createElement("div");
  div.className = "msg user";
  div.textContent = text;
  $("messages").appendChild(div);
  scrollDown();
}

// An assistant bubble: a collapsible reasoning block, the answer, tool calls and a note.
function addAssistantMessage() {
  const div = document.createElement("div");
  div.className = "msg assistant";
  div.dataset.state = "streaming";
  const details = document.createElement("details");
  details.className = "reasoning";
  details.hidden = true;
  const summary = document.createElement("summary");
  summary.textContent = "Reasoning";
  const reasoning = document.createElement("div");
  reasoning.className = "reasoning-text";
  details.append(summary, reasoning);
  const content = document.createElement("div");
  content.className = "content";
  const tools = document.createElement("div");
  tools.className = "tool-calls";
  const note = document.createElement("div");
  note.className = "note";
  div.append(details, content, tools, note);
  $("messages").appendChild(div);
  scrollDown();
  return { div, details, reasoning, content, tools, note };
}

function numberSetting(id, body, field, integer) {
  const raw = $(id).value.trim();
  if (raw === "") return;
  const v = integer ? parseInt(raw, 10) : parseFloat(raw);
  if (!Number.isNaN(v)) body[field] = v;
}

function requestBody() {
  const messages = [];
  const system = $("system-prompt").value.trim();
  if (system) messages.push({ role: "system", content: system });
  const body = {
    model: "qwenrt",
    messages: messages.concat(history),
    stream: true,
    stream_options: { include_usage: true },
    chat_template_kwargs: { enable_thinking: $("thinking").checked },
  };
  numberSetting("temperature", body, "temperature", false);
  numberSetting("top-p", body, "top_p", false);
  numberSetting("top-k", body, "top_k", true);
  numberSetting("min-p", body, "min_p", false);
  numberSetting("max-tokens", body, "max_tokens", true);
  numberSetting("seed", body, "seed", true);
  const tools = $("tools").value.trim();
  if (tools) body.tools = JSON.parse(tools);  // a SyntaxError is shown to the user
  return body;
}

function renderToolCalls(view, calls) {
  view.tools.replaceChildren();
  for (const call of calls) {
    if (!call) continue;
    const div = document.createElement("div");
    div.className = "tool-call";
    div.textContent = "tool call: " + call.function.name + "(" + call.function.arguments + ")";
    view.tools.appendChild(div);
  }
}

// Reads the server-sent events of `response`, calling onData with each parsed `data:` payload.
async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;  // ": keep-alive" comments and event names
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  history.push({ role: "user", content: text });
  addUserMessage(text);
  const view = addAssistantMessage();
  const answer = { role: "assistant", content: "" };
  let reasoning = "", finish = null, usage = null;
  const calls = [];
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").hidden = false;
  setStatus("generating…");
  const started = performance.now();
  try {
    const response = await fetch("v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(requestBody()), signal: controller.signal,
    });
    if (!response.ok) {
      let message = response.status + " " + response.statusText;
      try { message = (await response.json()).error.message; } catch (e) { /* not JSON */ }
      throw new Error(message);
    }
    await readEvents(response, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        const d = choice.delta || {};
        if (d.reasoning_content) {
          reasoning += d.reasoning_content;
          view.details.hidden = false;
          view.reasoning.textContent = reasoning;
        }
        if (d.content) {
          answer.content += d.content;
          view.content.textContent = answer.content;
        }
        for (const t of d.tool_calls || []) {
          const c = calls[t.index] || (calls[t.index] = { id: t.id, type: "function", function: { name: "", arguments: "" } });
          if (t.function && t.function.name) c.function.name += t.function.name;
          if (t.function && t.function.arguments) c.function.arguments += t.function.arguments;
          renderToolCalls(view, calls);
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
      scrollDown();
    });
    view.div.dataset.state = "done";
    const seconds = (performance.now() - started) / 1000;
    view.note.textContent = "finish: " + finish + (usage ? " · " + usage.completion_tokens + " tokens in " + seconds.toFixed(1) + " s" : "");
    setStatus("");
  } catch (e) {
    if (e.name === "AbortError") {
      view.div.dataset.state = "stopped";
      view.note.textContent = "stopped";
      setStatus("stopped");
    } else {
      view.div.dataset.state = "error";
      const err = document.createElement("div");
      err.className = "error";
      err.textContent = "error: " + e.message;
      view.div.appendChild(err);
      setStatus("error");
    }
  } finally {
    controller = null;
    $("send").disabled = false;
    $("stop").hidden = true;
  }
  if (reasoning) answer.reasoning_content = reasoning;
  if (calls.length) answer.tool_calls = calls.filter(Boolean);
  history.push(answer);
}

function newChat() {
  if (controller) controller.abort();
  history = [];
  $("messages").replaceChildren();
  setStatus("");
  $("input").focus();
}

async function showModel() {
  try {
    const r = await fetch("v1/models", { headers: headers() });
    if (r.ok) $("model-name").textContent = (await r.json()).data[0].id;
  } catch (e) { /* the name is decoration */ }
}

loadSettings();
for (const id of SETTINGS) $(id).addEventListener("change", () => saveSetting(id));
$("toggle-settings").addEventListener("click", () => {
  const s = $("settings");
  s.hidden = !s.hidden;
  $("toggle-settings").setAttribute("aria-expanded", String(!s.hidden));
});
$("new-chat").addEventListener("click", newChat);
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("api-key").addEventListener("change", showModel);
showModel();
