// The inspector page. Every call carries the key typed above; every string from the store is put
// in the page as text (textContent, append), never parsed as HTML.
"use strict";

const API = new URL("../", location.href); // the server's root: the page lives at /ui/
const PAGE = 20;
const KEY_ITEM = "aml-inspector-key";
const $ = (id) => document.getElementById(id);

let key = sessionStorage.getItem(KEY_ITEM) || "";
let user = null; // the open user's id
let session = null; // the session the messages are narrowed to, or null for every session
let generation = 0; // bumped whenever what is shown changes owner: late answers are dropped
const cursors = {};

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// ---- calls ---------------------------------------------------------------------------------

async function call(method, path, body) {
  // Header values are bytes: send the key's UTF-8 bytes, as the server compares them.
  const headers = {Authorization: "Bearer " + String.fromCharCode(...new TextEncoder().encode(key))};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(new URL(path, API), {
      method, headers, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "the server cannot be reached");
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data?.error?.message || response.statusText);
  return data;
}

// A user id as one path segment: dots too, so "." or ".." is never read as a directory.
const segment = (text) => encodeURIComponent(text).replace(/\./g, "%2E");
const userPath = (rest) => "users/" + segment(user) + rest;

// ---- what is shown -------------------------------------------------------------------------

function el(tag, props, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children); // strings become text nodes
  return node;
}

function say(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function hideData() {
  generation += 1;
  user = session = null;
  for (const id of ["users", "hits", "sessions", "messages", "proposed", "audit"]) $(id).replaceChildren();
  $("user-id").textContent = "";
  $("user-panel").hidden = true;
  $("main").hidden = true;
}

function fail(error) {
  if (error.status === 401) {
    hideData();
    say("Wrong or missing key.", true);
  } else {
    say(error.status ? `Error ${error.status}: ${error.message}` : `Error: ${error.message}`, true);
  }
}

// Runs an action; a failure is shown, never thrown at the page.
const guard = (action) => (...args) => action(...args).catch(fail);

function meta(...parts) {
  return el("p", {className: "meta"}, parts.filter((part) => part !== undefined && part !== "").join(" · "));
}

function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

// ---- paged lists ---------------------------------------------------------------------------

const LISTS = {
  users: {path: () => "users", field: "users", render: userItem},
  sessions: {path: () => userPath("/sessions"), field: "sessions", render: sessionItem},
  messages: {
    path: () => userPath("/messages"), field: "messages", render: messageItem,
    params: () => (session === null ? {} : {session_id: session}),
  },
  proposed: {
    path: () => userPath("/messages"), field: "messages", render: proposedItem,
    params: () => ({status: "proposed", order: "oldest"}),
  },
  audit: {path: () => userPath("/audit"), field: "events", render: auditItem},
};

// Shows the next page of a list (the first one when `fresh`).
async function more(name, fresh = false) {
  const list = LISTS[name];
  const asked = generation;
  if (fresh) cursors[name] = null;
  const params = new URLSearchParams({limit: PAGE, ...(list.params ? list.params() : {})});
  if (cursors[name] != null) params.set("cursor", cursors[name]);
  const button = $("more-" + name);
  button.disabled = true; // one page at a time: a second click would ask for the same page again
  const data = await call("GET", list.path() + "?" + params).finally(() => { button.disabled = false; });
  if (asked !== generation) return;
  if (fresh) $(name).replaceChildren();
  $(name).append(...data[list.field].map(list.render));
  if (!$(name).children.length) $(name).append(el("li", {className: "empty"}, "None."));
  cursors[name] = data.next_cursor;
  button.hidden = data.next_cursor == null;
}

function userItem(item) {
  const open = el("button", {type: "button", className: "link"}, item.user_id);
  open.addEventListener("click", guard(() => openUser(item.user_id)));
  return el("li", {}, open, meta(plural(item.messages, "message"), plural(item.sessions, "session"),
                                 item.last_activity && "last " + item.last_activity));
}

function sessionItem(item) {
  const open = el("button", {type: "button", className: "link"}, item.session_id);
  open.addEventListener("click", guard(() => showSession(item.session_id)));
  return el("li", {}, open, meta(plural(item.messages, "message"), item.first_at, item.last_at));
}

function messageFields(item) {
  const state = item.status && item.status !== "current" ? item.status : item.trust === "proposed" ? "proposed" : "";
  return [el("p", {className: "content"}, item.content),
          meta(item.id, item.role, "session " + item.session_id, item.created_at, state)];
}

function messageItem(item) {
  const forget = el("button", {type: "button"}, "Forget");
  forget.setAttribute("aria-label", "Forget message " + item.id);
  const row = el("li", {}, ...messageFields(item), forget);
  forget.addEventListener("click", guard(async () => {
    if (!confirm(`Forget message ${item.id}? It is removed from the memory for good.`)) return;
    await call("DELETE", userPath("/messages/" + segment(item.id)));
    row.remove();
    say(`Message ${item.id} forgotten.`);
  }));
  return row;
}

function proposedItem(item) {
  const accept = el("button", {type: "button"}, "Confirm");
  const reject = el("button", {type: "button"}, "Reject");
  accept.setAttribute("aria-label", "Confirm statement " + item.id);
  reject.setAttribute("aria-label", "Reject statement " + item.id);
  const row = el("li", {}, ...messageFields(item), el("p", {className: "row"}, accept, reject));
  const review = (verb, done) => guard(async () => {
    if (verb === "reject" && !confirm(`Reject statement ${item.id}? It is forgotten.`)) return;
    await call("POST", userPath("/messages/" + segment(item.id) + "/" + verb), {});
    row.remove();
    say(`Statement ${item.id} ${done}.`);
  });
  accept.addEventListener("click", review("confirm", "confirmed"));
  reject.addEventListener("click", review("reject", "rejected"));
  return row;
}

function auditItem(event) {
  return el("li", {}, meta("#" + event.seq, event.at, event.action, "by " + event.actor,
                           event.message_ids?.length ? "messages " + event.message_ids.join(", ") : undefined,
                           event.request_id && "request " + event.request_id,
                           event.content_hash && "hash " + event.content_hash));
}

// ---- search and its explanation ------------------------------------------------------------

function signalRow(signal) {
  const share = Math.round(signal.share * 100);
  return el("li", {className: "signal"},
            el("span", {className: "name"}, signal.signal),
            el("meter", {min: 0, max: 1, value: signal.share, title: `${share}% of the score`}),
            el("span", {className: "why"}, `rank ${signal.rank} · weight ${signal.weight} · ${share}% of the score`));
}

function explanation(explain) {
  if (!explain) return meta("no explanation returned");
  const listed = explain.signals.filter((signal) => signal.rank !== null);
  const unlisted = explain.signals.filter((signal) => signal.rank === null).map((signal) => signal.signal);
  return el("div", {className: "explain"},
            el("p", {className: "meta"}, "Why it ranked here:"),
            el("ul", {className: "signals"}, ...listed.map(signalRow)),
            unlisted.length ? meta("not listed by " + unlisted.join(", ")) : "");
}

function hitItem(hit, index) {
  return el("li", {}, el("p", {className: "content"}, hit.content),
            meta(`#${index + 1}`, hit.id, "score " + hit.score.toFixed(4), "session " + hit.session_id,
                 hit.created_at, hit.view),
            explanation(hit.explain));
}

async function search(event) {
  event.preventDefault();
  const asked = generation;
  const data = await call("POST", "search", {user_id: user, query: $("query").value, top_k: 10, explain: true});
  if (asked !== generation) return;
  $("hits").replaceChildren(...data.data.map(hitItem));
  if (!data.data.length) $("hits").append(el("li", {className: "empty"}, "No match."));
  say(`${plural(data.data.length, "result")}.`);
}

// ---- actions -------------------------------------------------------------------------------

async function start(event) {
  event?.preventDefault();
  key = $("key").value;
  sessionStorage.setItem(KEY_ITEM, key);
  hideData();
  say("Loading users…");
  await more("users", true);
  $("main").hidden = false;
  say("");
}

function clearKey() {
  key = "";
  $("key").value = "";
  sessionStorage.removeItem(KEY_ITEM);
  hideData();
  say("Key cleared.");
}

async function openUser(id) {
  generation += 1;
  user = id;
  session = null;
  for (const name of ["hits", "sessions", "messages", "proposed", "audit"]) $(name).replaceChildren();
  $("user-id").textContent = id;
  $("messages-scope").textContent = "";
  $("all-sessions").hidden = true;
  $("delete-confirm").value = "";
  $("delete-user").disabled = true;
  $("user-panel").hidden = false;
  await Promise.all(["sessions", "messages", "proposed", "audit"].map((name) => more(name, true)));
  $("user-title").focus();
}

async function showSession(id) {
  session = id;
  $("messages-scope").textContent = id === null ? "" : "in session " + id;
  $("all-sessions").hidden = id === null;
  await more("messages", true);
}

async function deleteUser(event) {
  event.preventDefault();
  if ($("delete-confirm").value !== user) return;
  const gone = user;
  await call("DELETE", userPath(""));
  hideData();
  await more("users", true);
  $("main").hidden = false;
  say(`User ${gone} deleted.`);
}

$("key").value = key;
$("key-form").addEventListener("submit", guard(start));
$("clear-key").addEventListener("click", clearKey);
$("search-form").addEventListener("submit", guard(search));
$("delete-form").addEventListener("submit", guard(deleteUser));
$("delete-confirm").addEventListener("input", () => {
  $("delete-user").disabled = $("delete-confirm").value !== user;
});
$("all-sessions").addEventListener("click", guard(() => showSession(null)));
for (const name of Object.keys(LISTS)) $("more-" + name).addEventListener("click", guard(() => more(name)));
$("user-title").tabIndex = -1;
if (key) guard(start)();
