// The playground page (page.hpp). Plain HTML, CSS and JavaScript in one string: the page
// posts to /v1/completions with stream: true and logprobs: 5, reads the Server-Sent Events
// from fetch()'s body stream, appends each chunk's text as it arrives, and lists every
// generated token with its probability and the model's top alternatives.
#include "serve/page.hpp"

namespace kael::serve {

std::string_view playground_page() {
  static constexpr std::string_view page = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kael playground</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
  header { padding: 12px 20px; background: #1d232a; color: #fff; }
  header b { font-size: 18px; } header span { opacity: .7; margin-left: 8px; }
  main { display: grid; grid-template-columns: minmax(300px, 1fr) minmax(300px, 1fr); gap: 16px; padding: 16px 20px; }
  section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 12px 14px; }
  h2 { font-size: 14px; margin: 0 0 8px; text-transform: uppercase; letter-spacing: .04em; color: #5a6572; }
  textarea { width: 100%; box-sizing: border-box; min-height: 110px; font: 14px/1.4 ui-monospace, monospace; }
  .settings { display: grid; grid-template-columns: repeat(3, 1fr); gap: 6px 12px; margin: 10px 0; }
  .settings label { display: flex; flex-direction: column; font-size: 12px; color: #5a6572; }
  .settings input { font: 14px ui-monospace, monospace; padding: 3px 5px; }
  button { font: inherit; padding: 6px 16px; border-radius: 6px; border: 1px solid #2b6cb0; background: #2b6cb0; color: #fff; cursor: pointer; }
  button.secondary { background: #fff; color: #2b6cb0; }
  button:disabled { opacity: .5; cursor: default; }
  #output { white-space: pre-wrap; word-break: break-word; font: 14px/1.5 ui-monospace, monospace; min-height: 120px; }
  #output .prompt { color: #8a94a0; }
  #status { font-size: 13px; color: #5a6572; margin-top: 8px; min-height: 1.2em; }
  #status.error { color: #b00020; }
  #tokens { font: 13px ui-monospace, monospace; max-height: 420px; overflow: auto; }
  .tok { display: grid; grid-template-columns: 9em 4.5em 1fr; gap: 8px; padding: 3px 0; border-bottom: 1px solid #eef0f3; }
  .tok .t { background: #e8f0fb; border-radius: 3px; padding: 0 3px; white-space: pre; overflow: hidden; text-overflow: ellipsis; }
  .tok .p { text-align: right; color: #2b6cb0; }
  .tok .alts span { margin-right: 10px; white-space: pre; color: #5a6572; }
  .tok .alts span.chosen { color: #1d232a; font-weight: 600; }
  @media (max-width: 800px) { main { grid-template-columns: 1fr; } }
</style>
</head>
<body>
<header><b>kael</b><span id="model">GPT-2 playground</span></header>
<main>
  <section>
    <h2>Prompt</h2>
    <textarea id="prompt" placeholder="Type a prompt...">Hello, my name is</textarea>
    <div class="settings">
      <label>max tokens <input id="max_tokens" type="number" min="0" value="64"></label>
      <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.05" value="0.8"></label>
      <label>top p <input id="top_p" type="number" min="0.01" max="1" step="0.01" value="1"></label>
      <label>top k (0 = off) <input id="top_k" type="number" min="0" value="40"></label>
      <label>min p <input id="min_p" type="number" min="0" max="1" step="0.01" value="0"></label>
      <label>repetition penalty <input id="repetition_penalty" type="number" min="0.1" step="0.05" value="1"></label>
      <label>presence penalty <input id="presence_penalty" type="number" min="-2" max="2" step="0.1" value="0"></label>
      <label>frequency penalty <input id="frequency_penalty" type="number" min="-2" max="2" step="0.1" value="0"></label>
      <label>seed (empty = random) <input id="seed" type="number" value=""></label>
      <label style="grid-column: span 3">stop string (\n for newline; empty = none) <input id="stop" type="text" value=""></label>
      <label style="grid-column: span 3">API key (when the server has --api-key; kept in this page only) <input id="api_key" type="password" autocomplete="off" value=""></label>
    </div>
    <button id="generate">Generate</button>
    <button id="cancel" class="secondary" disabled>Stop</button>
    <div id="status"></div>
  </section>
  <section>
    <h2>Completion</h2>
    <div id="output"></div>
  </section>
  <section style="grid-column: 1 / -1">
    <h2>Tokens: probability and top alternatives</h2>
    <div id="tokens"></div>
  </section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let controller = null;

// Whitespace made visible in token labels.
const visible = (s) => s.replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5");
const percent = (logprob) => (100 * Math.exp(logprob)).toFixed(logprob > Math.log(0.1) ? 1 : 2) + "%";

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function numberField(body, id, integer) {
  const raw = $(id).value.trim();
  if (raw === "") return;
  body[id] = integer ? parseInt(raw, 10) : parseFloat(raw);
}

// The Authorization header when a key was typed in.
function authorized(headers) {
  const key = $("api_key").value.trim();
  if (key) headers["Authorization"] = "Bearer " + key;
  return headers;
}

function requestBody() {
  const body = { prompt: $("prompt").value, stream: true, logprobs: 5 };
  for (const id of ["max_tokens", "top_k", "seed"]) numberField(body, id, true);
  for (const id of ["temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"])
    numberField(body, id, false);
  const stop = $("stop").value.replace(/\\n/g, "\n");
  if (stop !== "") body.stop = [stop];
  return body;
}

function addTokens(logprobs) {
  for (let i = 0; i < logprobs.tokens.length; i++) {
    const row = document.createElement("div");
    row.className = "tok";
    const token = document.createElement("span");
    token.className = "t";
    token.textContent = visible(logprobs.tokens[i]);
    token.title = "bytes: " + JSON.stringify(logprobs.bytes[i]);
    const p = document.createElement("span");
    p.className = "p";
    p.textContent = logprobs.token_logprobs[i] === null ? "" : percent(logprobs.token_logprobs[i]);
    const alts = document.createElement("span");
    alts.className = "alts";
    for (const [alt, lp] of Object.entries(logprobs.top_logprobs[i] || {})) {
      const a = document.createElement("span");
      if (alt === logprobs.tokens[i]) a.className = "chosen";
      a.textContent = visible(alt) + " " + percent(lp);
      alts.appendChild(a);
    }
    row.append(token, p, alts);
    $("tokens").appendChild(row);
  }
}

// Returns true at the end of the stream.
function handleEvent(event, started) {
  for (const line of event.split("\n")) {
    if (!line.startsWith("data: ")) continue;
    const data = line.slice(6);
    if (data === "[DONE]") return true;
    const message = JSON.parse(data);
    if (message.error) { setStatus("error: " + message.error.message, true); continue; }
    const choice = message.choices[0];
    if (choice.text) $("output").append(choice.text);
    if (choice.logprobs) addTokens(choice.logprobs);
    if (choice.finish_reason) {
      const seconds = (performance.now() - started) / 1000;
      const n = message.usage ? message.usage.completion_tokens : $("tokens").children.length;
      setStatus(`finished (${choice.finish_reason}): ${n} tokens in ${seconds.toFixed(2)} s`);
    } else {
      setStatus(`generating... ${$("tokens").children.length} tokens`);
    }
  }
  return false;
}

async function generate() {
  if (controller) controller.abort();
  controller = new AbortController();
  $("output").textContent = "";
  $("tokens").textContent = "";
  setStatus("waiting for the model...");
  $("generate").disabled = true;
  $("cancel").disabled = false;
  const started = performance.now();
  try {
    const response = await fetch("/v1/completions", {
      method: "POST", headers: authorized({ "Content-Type": "application/json" }),
      body: JSON.stringify(requestBody()), signal: controller.signal,
    });
    if (!response.ok) {
      const error = await response.json().catch(() => null);
      setStatus(`error ${response.status}: ` + (error && error.error ? error.error.message : response.statusText), true);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (handleEvent(event, started)) return;
      }
    }
  } catch (e) {
    if (e.name === "AbortError") setStatus("stopped"); else setStatus("error: " + e.message, true);
  } finally {
    $("generate").disabled = false;
    $("cancel").disabled = true;
  }
}

$("generate").addEventListener("click", generate);
$("cancel").addEventListener("click", () => { if (controller) controller.abort(); });
$("prompt").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) generate(); });
fetch("/v1/models", { headers: authorized({}) }).then((r) => r.json()).then((m) => {
  const model = m.data[0];
  $("model").textContent = `${model.id}, context ${model.context_length} tokens`;
}).catch(() => {});
</script>
</body>
</html>
)PAGE";
  return page;
}

}  // namespace kael::serve
