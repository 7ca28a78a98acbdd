// The inspector page. Every call carries the key typed above; every string from the store is put
// in the page as text (textContent, append), never parsed as HTML.
"use strict";

const API = new URL("../", location.href); // the server's root: the page lives at /ui/
const PAGE = 20;
const KEY_ITEM = "aml-inspector-key";
const $ = (id) => document.getElementById(id);
// Where the users and the open user share one column: the list folds away once a user is open.
const NARROW = matchMedia("(max-width: 48rem)");

let key = sessionStorage.getItem(KEY_ITEM) || "";
let user = null; // the open user's id
let session = null; // the session the messages are narrowed to, or null for every session
let lastQuery = ""; // the query last searched for the open user ("" for none): its hits are shown
let generation = 0; // bumped whenever what is shown changes owner: late answers are dropped
let keyless = false; // the server answered a call sent without a key: it has none to ask for
// The open user's roles → the name its conversation gives each (GET .../speakers), and the reading of
// them: a list that shows roles waits for it, so that each row is drawn with its speaker's name.
let roleNames = new Map();
let namesRead = Promise.resolve();
const cursors = {};
// Each list's latest call: an answer to an earlier one (a page asked before the list was read
// afresh, or a search before the next) is dropped, not drawn over the later one.
const tickets = {};
const ticket = (name) => (tickets[name] = (tickets[name] || 0) + 1);
// The messages forgotten here, [user, id] as JSON → the count of forgets then: an answer asked for
// before a message was forgotten (a list reloading meanwhile) must not show it again.
const forgottenAt = new Map();
let forgets = 0;

class ApiError extends Error {
  constructor(status, message, code = "") {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// A read of a user the store does not hold (never added, or deleted) is a 404 unknown_user: the
// page shows that user as empty, and says nothing is stored for it.
const heldNot = (empty) => (error) => {
  if (error.code === "unknown_user") return empty;
  throw error;
};

// ---- calls ---------------------------------------------------------------------------------

async function call(method, path, body) {
  // Header values are bytes: send the key's UTF-8 bytes, as the server compares them. No key, no
  // header: a server without a key answers, one with a key refuses (401).
  const headers = key ? {Authorization: "Bearer " + String.fromCharCode(...new TextEncoder().encode(key))} : {};
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
  if (!response.ok) {
    throw new ApiError(response.status, data?.error?.message || response.statusText, data?.error?.code);
  }
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
  lastQuery = "";
  forgetSpeakers();
  for (const id of ["users", "hits", "sessions", "messages", "proposed", "audit"]) $(id).replaceChildren();
  $("user-id").textContent = "";
  $("query").value = "";
  $("open-id").value = "";
  $("user-panel").hidden = true;
  $("main").hidden = true;
}

function fail(error) {
  if (error.status === 401) {
    keyless = false; // it has a key now (a server restarted with one)
    showKeyless(false);
    hideData();
    say("Wrong or missing key.", true);
  } else {
    say(error.status ? `Error ${error.status}: ${error.message}` : `Error: ${error.message}`, true);
  }
}

// Runs an action; a failure is shown, never thrown at the page.
const guard = (action) => (...args) => action(...args).catch(fail);

// A line of small facts joined by " · ": each part a string, a node, or a list of them.
function meta(...parts) {
  const line = el("p", {className: "meta"});
  parts.filter((part) => part !== undefined && part !== null && part !== "").forEach((part, index) => {
    if (index) line.append(" · ");
    line.append(...[].concat(part));
  });
  return line;
}

const pad = (number, width = 2) => String(number).padStart(width, "0");

// A stored time (ISO 8601 UTC) as a compact local date and time that never wraps; the exact value
// stays in its title and datetime attribute.
function when(iso) {
  if (!iso) return undefined;
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const text = `${pad(date.getFullYear(), 4)}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
               `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  return el("time", {className: "when", dateTime: iso, title: iso}, text);
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
  audit: {path: () => userPath("/audit"), field: "events", render: auditItem, params: () => ({order: "newest"})},
};

// Shows the next page of a list (the first one when `fresh`, drawn over the list shown once it comes).
async function more(name, fresh = false) {
  const list = LISTS[name];
  const asked = generation;
  const mine = ticket(name);
  const since = forgets;
  const cursor = fresh ? null : cursors[name];
  const params = new URLSearchParams({limit: PAGE, ...(list.params ? list.params() : {})});
  if (cursor != null) params.set("cursor", cursor);
  const button = $("more-" + name);
  button.disabled = true; // one page at a time: a second click would ask for the same page again
  const data = await call("GET", list.path() + "?" + params)
    .catch(heldNot({[list.field]: [], next_cursor: null}))
    .finally(() => {
      if (tickets[name] === mine) button.disabled = false;
    });
  const current = () => asked === generation && tickets[name] === mine;
  if (!current()) return;
  await namesRead; // rows show their speakers' names
  if (!current()) return;
  if (fresh) $(name).replaceChildren();
  const shown = (item) => !(forgottenAt.get(JSON.stringify([user, item.id])) > since);
  $(name).append(...data[list.field].filter(shown).map(list.render));
  if (!$(name).children.length) $(name).append(el("li", {className: "empty"}, "None."));
  cursors[name] = data.next_cursor;
  button.hidden = data.next_cursor == null;
  return true;
}

function userItem(item) {
  const open = el("button", {type: "button", className: "link"}, item.user_id);
  open.addEventListener("click", guard(() => openUser(item.user_id)));
  const row = el("li", {}, open, meta(plural(item.messages, "message"), plural(item.sessions, "session"),
                                      item.last_activity && ["last ", when(item.last_activity)]));
  row.dataset.user = item.user_id;
  return row;
}

function sessionItem(item) {
  const open = el("button", {type: "button", className: "link"}, item.session_id);
  open.addEventListener("click", guard(() => showSession(item.session_id)));
  const span = item.first_at === item.last_at ? when(item.first_at)
    : [when(item.first_at), " – ", when(item.last_at)];
  return el("li", {}, open, meta(plural(item.messages, "message"), span));
}

// Takes a message of `owner` off the lists: whichever row shows it now, as a list may have been drawn
// afresh (a session chosen, the user reopened) since the row that was clicked.
function unlist(owner, id, ...names) {
  if (owner !== user) return; // another user is shown now, and ids are per user
  for (const name of names) {
    for (const row of [...$(name).children]) if (row.dataset.id === id) row.remove();
  }
}

function noteForgotten(owner, id) {
  forgottenAt.set(JSON.stringify([owner, id]), ++forgets);
  unlist(owner, id, "messages", "proposed");
}

function messageFields(item) {
  const state = item.status && item.status !== "current" ? item.status : item.trust === "proposed" ? "proposed" : "";
  return [el("p", {className: "content"}, item.content),
          meta(item.id, speaker(item.role, item.content), "session " + item.session_id, when(item.created_at), state)];
}

function messageItem(item) {
  const forget = el("button", {type: "button"}, "Forget");
  forget.setAttribute("aria-label", "Forget message " + item.id);
  const row = el("li", {}, ...messageFields(item), forget);
  row.dataset.id = item.id;
  forget.addEventListener("click", guard(async () => {
    if (!confirm(`Forget message ${item.id}? It is removed from the memory for good.`)) return;
    const owner = user;
    await call("DELETE", userPath("/messages/" + segment(item.id)));
    noteForgotten(owner, item.id);
    say(`Message ${item.id} forgotten.`);
    await readAgain(owner);
  }));
  return row;
}

function proposedItem(item) {
  const accept = el("button", {type: "button"}, "Confirm");
  const reject = el("button", {type: "button"}, "Reject");
  accept.setAttribute("aria-label", "Confirm statement " + item.id);
  reject.setAttribute("aria-label", "Reject statement " + item.id);
  const row = el("li", {}, ...messageFields(item), el("p", {className: "row"}, accept, reject));
  row.dataset.id = item.id;
  const review = (verb, done) => guard(async () => {
    if (verb === "reject" && !confirm(`Reject statement ${item.id}? It is forgotten.`)) return;
    const owner = user;
    await call("POST", userPath("/messages/" + segment(item.id) + "/" + verb), {});
    if (verb === "reject") noteForgotten(owner, item.id); // a rejected statement is forgotten
    else unlist(owner, item.id, "proposed");
    say(`Statement ${item.id} ${done}.`);
    await readAgain(owner);
  });
  accept.addEventListener("click", review("confirm", "confirmed"));
  reject.addEventListener("click", review("reject", "rejected"));
  return row;
}

// What a change to the open user's memory (a forget, a review) made stale, read again: its audit
// trail, its sessions' counts, the users' counts and the hits of the last search. The messages
// list is not: the row is taken off it, and the pages shown stay as they are.
async function readAgain(owner) {
  if (owner !== user) return; // another user is open now: it was read afresh as it was opened
  await Promise.all(["audit", "sessions"].map((name) => more(name, true))
    .concat(lastQuery ? runSearch(lastQuery, {quiet: true, record: false}) : [], usersAgain()));
}

// The users listed, read again: as many pages as are shown, the filter typed applied to them.
async function usersAgain() {
  if (!$("router-note").hidden) return; // a cluster router lists none
  const asked = generation;
  const pages = Math.max(1, Math.ceil($("users").querySelectorAll(":scope > li[data-user]").length / PAGE));
  if (!(await more("users", true))) return;
  for (let page = 1; page < pages && cursors.users != null; page += 1) {
    if (asked !== generation || !(await more("users"))) return;
  }
  filterUsers();
}

function auditItem(event) {
  return el("li", {}, meta("#" + event.seq, when(event.at), event.action, "by " + event.actor,
                           event.message_ids?.length ? "messages " + event.message_ids.join(", ") : undefined,
                           event.request_id && "request " + event.request_id,
                           event.content_hash && "hash " + event.content_hash));
}

// ---- speakers ------------------------------------------------------------------------------

// A message's text that names its own speaker ("Caroline: ..."), as features.speaker_of reads one.
const SPEAKER_PREFIX = /^\s*[A-Z][\p{L}\p{M}\p{N}_'’.-]*(?:\s+[A-Z][\p{L}\p{M}\p{N}_'’.-]*){0,2}\s*:\s/u;

// Who said a message: "Caroline (user)" when the conversation gives its role a name; the role alone
// when it gives none, or when the text names its own speaker (which may be another).
function speaker(role, content) {
  const name = roleNames.get(role);
  return name && !SPEAKER_PREFIX.test(content) ? `${name} (${role})` : role;
}

// The name a role's messages are shown with: its longest, the full one where "Mel" and "Melanie" are
// both used, as the reader's view of an answer names it (memory/reader_view.py).
const fullest = (names) => names.map((name) => name.name)
  .reduce((best, name) => (name.length > best.length || (name.length === best.length && name > best) ? name : best));

const mentions = (counts) => counts.addressed + counts.introduced;

function forgetSpeakers() {
  roleNames = new Map();
  namesRead = Promise.resolve();
  $("speakers-box").open = false;
  $("speakers-line").textContent = "";
  $("speakers").replaceChildren();
  $("candidates").textContent = "";
}

// Reads the open user's speakers, once as it is opened. A failure other than the key's leaves each
// message with its role alone, and says so.
async function readSpeakers(asked) {
  let data;
  try {
    data = await call("GET", userPath("/speakers")).catch(heldNot({speakers: [], candidates: []}));
  } catch (error) {
    if (error.status === 401) throw error;
    if (asked === generation) $("speakers-line").textContent = `not read (${error.message})`;
    return;
  }
  if (asked !== generation) return;
  roleNames = new Map(data.speakers.map((role) => [role.role, fullest(role.names)]));
  showSpeakers(data);
}

// A name as the line shows it: its evidence in its title.
function nameSpan(name) {
  const title = name.evidence.length ? "evidence: messages " + name.evidence.join(", ") : "";
  return el("span", {className: "speaker", title}, name.name);
}

// One line of each role's names and mentions ("user: Caroline (126 mentions)"); unfolded, each name's
// counts and evidence, and the names found but not attached, with what they were given.
function showSpeakers(data) {
  const line = $("speakers-line");
  line.replaceChildren();
  data.speakers.forEach((role, index) => {
    const total = role.names.reduce((sum, name) => sum + mentions(name), 0);
    line.append(index ? " · " : "", role.role + ": ",
                ...role.names.flatMap((name, at) => [at ? ", " : "", nameSpan(name)]), ` (${plural(total, "mention")})`);
  });
  if (!data.speakers.length) line.textContent = "no name given to a role";
  $("speakers").replaceChildren(...data.speakers.map(speakerItem));
  const unattached = data.candidates.map((name) =>
    `${name.name} (${name.roles.map((role) => `${role.role} ${mentions(role)}`).join(", ")})`);
  $("candidates").textContent = unattached.length
    ? "Found but not attached (one mention, split between roles, or one of several people in a role): " +
      unattached.join(" · ")
    : "No other name found.";
}

function speakerItem(role) {
  return el("li", {}, el("p", {className: "role"}, role.role),
            ...role.names.map((name) => meta(
              el("strong", {}, name.name), "addressed " + plural(name.addressed, "time"),
              name.introduced ? "introduced " + plural(name.introduced, "time") : "",
              name.evidence.length ? "evidence " + name.evidence.join(", ") : "")));
}

// ---- search and its explanation ------------------------------------------------------------

function signalRow(signal) {
  const share = Math.round(signal.share * 100);
  return el("li", {className: "signal"},
            el("span", {className: "name"}, signal.signal),
            el("meter", {min: 0, max: 1, value: signal.share, title: `${share}% of the score`}),
            el("span", {className: "why"}, `rank ${signal.rank} · weight ${signal.weight} · ${share}% of the score`));
}

// `lexical` ranks single messages and `window` windows of consecutive messages, scored from the
// lexical matches of the messages they hold: a window missing from the lexical list (or a message
// from the window list) is not a result without matching words, and is not said to be.
function explanation(hit) {
  const explain = hit.explain;
  if (!explain) return meta("no explanation returned");
  const ranked = (name) => (explain.signals.find((signal) => signal.signal === name)?.rank ?? null) !== null;
  const lexical = ranked("lexical");
  const windowed = ranked("window"); // a window cut to one message keeps its window's ranks
  const otherKind = (name) => (name === "lexical" && windowed && !lexical) || (name === "window" && lexical && !windowed);
  const listed = explain.signals.filter((signal) => signal.rank !== null);
  const unlisted = explain.signals.filter((signal) => signal.rank === null && !otherKind(signal.signal))
    .map((signal) => signal.signal);
  const notes = [];
  if (windowed && !lexical) {
    notes.push(meta("Its words were matched through its window: the window list scores a window by the " +
                    "lexical matches of the messages it holds (the lexical list ranks single messages only)."));
  }
  const shaped = [lexical && "lexical", windowed && "window"].filter(Boolean);
  if (hit.evidence_flags?.includes("segment") && shaped.length) {
    notes.push(meta(`Its conversation segment matches the query too, which lifted it in the ${shaped.join(" and ")} list.`));
  }
  if (unlisted.length) notes.push(meta(`No part from ${unlisted.join(", ")} (their lists do not hold it).`));
  return el("div", {className: "explain"}, el("p", {className: "meta"}, "Why it ranked here:"),
            el("ul", {className: "signals"}, ...listed.map(signalRow)), ...notes);
}

// A window's messages, each with its speaker; `members` is null when they could not be read (a
// server without provenance), a member null when it is no longer stored.
function windowMembers(hit, members) {
  return el("ol", {className: "members"}, ...hit.source_message_ids.map((id, index) => {
    const member = members[index];
    if (!member) return el("li", {className: "member gone"}, el("span", {className: "role"}, id),
                           el("p", {className: "meta"}, `message ${id} is no longer stored`));
    const row = el("li", {className: "member"}, el("span", {className: "role"}, speaker(member.role, member.content)),
                   el("p", {className: "content"}, member.content));
    row.dataset.id = id;
    return row;
  }));
}

// Context the answer window added after the ranked hits (a server with answer_window_tokens): its
// session's messages chosen to fill the reader's window, not ranked, so with no score to show. Its
// explanation, when asked, says why each message was chosen.
const isContext = (hit) => hit.view === "context" || Boolean(hit.explain?.context);

function contextReasons(hit) {
  const chosen = Array.isArray(hit.explain?.context) ? hit.explain.context : [];
  if (!chosen.length) return undefined;
  return el("div", {className: "explain"}, el("p", {className: "meta"}, "Why each message is here:"),
            el("ul", {className: "reasons"}, ...chosen.map((reason) =>
              el("li", {className: "reason"}, el("span", {className: "name"}, String(reason.message_id)),
                 el("span", {className: "why"}, String(reason.chosen))))));
}

function contextItem(hit, index) {
  const count = hit.source_message_ids?.length;
  const row = el("li", {className: "context"}, el("p", {className: "content"}, hit.content),
                 meta(`#${index + 1}`, hit.id, "context · chosen to fill the reader's window, not ranked",
                      count > 1 ? plural(count, "message") : speaker(hit.role, hit.content),
                      "session " + hit.session_id, when(hit.created_at)));
  const reasons = contextReasons(hit);
  if (reasons) row.append(reasons);
  row.dataset.view = "context";
  return row;
}

function hitItem(hit, index, members) {
  if (isContext(hit)) return contextItem(hit, index);
  const isWindow = members != null;
  const body = isWindow ? windowMembers(hit, members) : el("p", {className: "content"}, hit.content);
  const kind = isWindow ? `window of ${hit.source_message_ids.length} messages` : speaker(hit.role, hit.content);
  const row = el("li", {}, body,
                 meta(`#${index + 1}`, hit.id, "score " + hit.score.toFixed(4), kind, "session " + hit.session_id,
                      when(hit.created_at)),
                 explanation(hit));
  row.dataset.view = isWindow ? "window" : "message";
  return row;
}

// Each message of a window hit, read by its id (a per-user route, so the router serves it too): the
// hit's own role names only the distinct roles. A message forgotten since is null.
async function membersOf(hit) {
  if (hit.view !== "window" || !hit.source_message_ids?.length) return null;
  return Promise.all(hit.source_message_ids.map((id) =>
    call("GET", userPath("/messages/" + segment(id))).catch((error) => {
      if (error.status === 404) return null;
      throw error;
    })));
}

// Searches the open user's memory for `query` and shows its hits (the answer to the latest search
// only); `quiet` leaves the status as it is, `record` keeps the query in the page's address.
async function runSearch(query, {quiet = false, record = true} = {}) {
  const asked = generation;
  const mine = ticket("hits");
  lastQuery = query;
  if (record) remember(false);
  const current = () => asked === generation && tickets.hits === mine;
  const data = await call("POST", "search", {user_id: user, query, top_k: 10, explain: true});
  if (!current()) return;
  const members = await Promise.all(data.data.map(membersOf));
  await namesRead;
  if (!current()) return;
  $("hits").replaceChildren(...data.data.map((hit, index) => hitItem(hit, index, members[index])));
  if (!data.data.length) $("hits").append(el("li", {className: "empty"}, "No match."));
  if (!quiet) say(`${plural(data.data.length, "result")}.`);
}

function search(event) {
  event.preventDefault();
  return runSearch($("query").value);
}

// ---- actions -------------------------------------------------------------------------------

const listedIds = () => [...$("users").children].filter((row) => row.dataset.user !== undefined)
  .map((row) => row.dataset.user);

// The user Open user opens for the text typed: a listed id typed exactly; else the one listed user
// whose id starts with it (in its case, or else in any case); else exactly the id typed, listed or
// not. `starting` holds every listed id that starts with it, in any case.
function target(typed) {
  const ids = listedIds();
  const starting = ids.filter((id) => id.toLowerCase().startsWith(typed.toLowerCase()));
  if (ids.includes(typed)) return {id: typed, starting};
  const sameCase = starting.filter((id) => id.startsWith(typed));
  if (sameCase.length === 1) return {id: sameCase[0], starting};
  if (!sameCase.length && starting.length === 1) return {id: starting[0], starting};
  return {id: typed, starting};
}

// Shows the listed users matching the id typed (any part of it, any case), says how many, and
// which user Open user opens.
function filterUsers() {
  const raw = $("open-id").value;
  const typed = raw.toLowerCase();
  const rows = [...$("users").children].filter((row) => row.dataset.user !== undefined);
  let matching = 0;
  for (const row of rows) {
    row.hidden = !row.dataset.user.toLowerCase().includes(typed);
    if (!row.hidden) matching += 1;
  }
  const more = !$("more-users").hidden;
  $("users-count").textContent = (typed ? `${matching} of ` : "") + plural(rows.length, "user") +
    (more ? ", more on the server" : "");
  $("users-filtered").hidden = !typed;
  const opens = typed ? target(raw).id : raw;
  $("users-filtered").textContent = !typed ? ""
    : (matching ? "" : "No user listed matches. ") +
      (more ? "Only the users listed are filtered: More users lists the next ones. " : "") +
      (opens !== raw ? `Open user opens ${opens}, the one user listed whose id starts with the text typed.`
        : "Open user opens exactly the id typed.");
}

// The first page of users; a cluster router answers 404 here, as each shard lists only its own.
async function listUsers() {
  $("router-note").hidden = true;
  $("open-hint").hidden = false;
  $("users-box").hidden = false;
  $("users-box").open = true;
  try {
    await more("users", true);
  } catch (error) {
    if (error.status !== 404) throw error;
    // The router answers this itself, without the key: check the key with a shard, asking for a
    // user no server accepts (an id of a space: 400 with the right key, 401 with a wrong one).
    await call("GET", "users/%20/audit?limit=1").catch((refused) => {
      if (refused.status === 401) throw refused;
    });
    $("users-box").hidden = true;
    $("open-hint").hidden = true; // nothing listed to filter
    $("router-note").hidden = false;
  }
  filterUsers();
}

// Lists the users with the key typed (`event`: the key form) or the one the tab keeps. With neither,
// it asks without a key: a server that has none answers, and is used as it is; one that has a key
// refuses, and the page asks for it. Then shows what the page's address names.
async function start(event) {
  event?.preventDefault();
  if (event) {
    key = $("key").value;
    sessionStorage.setItem(KEY_ITEM, key);
  }
  const probing = !event && !key;
  hideData();
  const asked = generation;
  say(probing ? "" : "Loading users…");
  try {
    await listUsers();
  } catch (error) {
    if (asked !== generation) return; // a key typed meanwhile: its own answer is shown
    if (probing && error.status === 401) {
      say("Type the API key and press Enter.");
      $("key").focus();
      return;
    }
    throw error;
  }
  if (asked !== generation) return;
  if (!key) keyless = true;
  showKeyless(keyless);
  $("main").hidden = false;
  say("");
  if (!$("router-note").hidden) $("open-id").focus();
  await follow();
}

// A server without a key shows no key box (a newcomer took it for a step to do), only a note
// saying so, with a way to type one anyway.
function showKeyless(without) {
  $("key-note").hidden = !without;
  $("key-form").hidden = without;
  $("key-hint").hidden = without;
}

function clearKey() {
  key = "";
  $("key").value = "";
  sessionStorage.removeItem(KEY_ITEM);
  hideData();
  remember(false); // nor the user's id in the address
  say("Key cleared.");
}

const shows = (name) => [...$(name).children].some((row) => !row.classList.contains("empty"));

// Opens a user: every list read afresh, narrowed to `narrowed`'s messages and searched for `query`
// when given (the page's address restored). `record` keeps it in the address as a new history entry;
// `starting`, the listed ids the text typed starts with, are named if nothing is stored for `id`.
async function openUser(id, {narrowed = null, query = "", record = true, starting = []} = {}) {
  generation += 1;
  const asked = generation;
  user = id;
  session = narrowed;
  lastQuery = query;
  if (record) remember(true);
  for (const name of ["hits", "sessions", "messages", "proposed", "audit"]) $(name).replaceChildren();
  $("user-id").textContent = id;
  $("query").value = query;
  say("");
  $("messages-scope").textContent = narrowed === null ? "" : "in session " + narrowed;
  $("all-sessions").hidden = narrowed === null;
  $("delete-confirm").value = "";
  $("delete-user").disabled = true;
  forgetSpeakers();
  $("speakers-line").textContent = "reading…";
  $("user-panel").hidden = false;
  if (NARROW.matches) $("users-box").open = false; // the user, not every user above it
  namesRead = readSpeakers(asked);
  const reads = [namesRead, ...["sessions", "messages", "proposed", "audit"].map((name) => more(name, true))];
  if (query) reads.push(runSearch(query, {record: false}));
  await Promise.all(reads);
  if (asked !== generation) return;
  if (!["sessions", "messages", "proposed", "audit"].some(shows)) {
    const listed = starting.length
      ? ` Listed users whose id starts with it: ${starting.slice(0, 10).join(", ")}${starting.length > 10 ? ", …" : ""}.`
      : "";
    say(`Nothing is stored for user ${id}: ids are exact (case, spaces and punctuation count).${listed}`);
  }
  $("user-title").focus();
}

// Closes the open user (the address names none: back to before one was opened).
function closeUser() {
  generation += 1;
  user = session = null;
  lastQuery = "";
  forgetSpeakers();
  for (const name of ["hits", "sessions", "messages", "proposed", "audit"]) $(name).replaceChildren();
  $("user-id").textContent = "";
  $("query").value = "";
  $("user-panel").hidden = true;
  $("users-box").open = true;
  say("");
}

async function openTyped(event) {
  event.preventDefault();
  const typed = $("open-id").value;
  if (!typed) return;
  const {id, starting} = target(typed);
  await openUser(id, {starting: id === typed ? starting : []});
}

async function showSession(id, record = true) {
  session = id;
  if (record) remember(false);
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
  remember(false);
  await listUsers();
  $("main").hidden = false;
  say(`User ${gone} deleted.`);
}

// ---- the page's address --------------------------------------------------------------------

// The open user, the session its messages are narrowed to and its last query, in the address's
// fragment (#user=alice&session=s2&q=red%20kite, each value percent-encoded whatever it holds), so
// that a reload, a link, or back and forward show them again. Never the key.
function address() {
  if (user === null) return "";
  return [["user", user], ["session", session], ["q", lastQuery]]
    .filter(([, value]) => value !== null && value !== "")
    .map(([name, value]) => name + "=" + encodeURIComponent(value)).join("&");
}

function readAddress() {
  const found = new Map();
  for (const part of location.hash.replace(/^#/, "").split("&")) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    try {
      found.set(part.slice(0, at), decodeURIComponent(part.slice(at + 1)));
    } catch {
      // a malformed escape: that part is left out
    }
  }
  return {user: found.get("user") || null, session: found.get("session") || null, query: found.get("q") || ""};
}

// Puts what is shown in the address: a new history entry (`push`: another user opened) or in place
// of the current one (a session chosen, a search).
function remember(push) {
  const hash = address();
  if (hash === location.hash.replace(/^#/, "")) return;
  history[push ? "pushState" : "replaceState"](null, "", hash ? "#" + hash : location.pathname + location.search);
}

// Shows what the address names: on load once the users are listed, and on back, forward or an
// address edited. The user is opened afresh unless it is the one open; then its session and query.
async function follow() {
  if ($("main").hidden) return; // no key yet: the address is followed once the users are listed
  const want = readAddress();
  if (want.user === null) {
    if (user !== null) closeUser();
    return;
  }
  if (want.user !== user) {
    await openUser(want.user, {narrowed: want.session, query: want.query, record: false});
    return;
  }
  const reads = [];
  if (want.session !== session) reads.push(showSession(want.session, false));
  if (want.query !== lastQuery) {
    $("query").value = want.query;
    if (want.query) {
      reads.push(runSearch(want.query, {record: false}));
    } else {
      ticket("hits"); // a search still on its way is not shown
      lastQuery = "";
      $("hits").replaceChildren();
    }
  }
  await Promise.all(reads);
}

$("key").value = key;
$("key-form").addEventListener("submit", guard(start));
$("show-key").addEventListener("click", () => {
  $("key-form").hidden = false;
  $("key-hint").hidden = false;
  $("key").focus();
});
$("clear-key").addEventListener("click", clearKey);
$("search-form").addEventListener("submit", guard(search));
$("open-form").addEventListener("submit", guard(openTyped));
$("open-id").addEventListener("input", filterUsers);
$("delete-form").addEventListener("submit", guard(deleteUser));
$("delete-confirm").addEventListener("input", () => {
  $("delete-user").disabled = $("delete-confirm").value !== user;
});
$("all-sessions").addEventListener("click", guard(() => showSession(null)));
for (const name of Object.keys(LISTS)) {
  const after = name === "users" ? filterUsers : () => {}; // the filter typed applies to the next page too
  $("more-" + name).addEventListener("click", guard(() => more(name).then(after)));
}
// Back and forward (popstate), or the fragment edited (hashchange, after popstate): whichever
// comes second finds the page showing what the address names already.
window.addEventListener("popstate", guard(follow));
window.addEventListener("hashchange", guard(follow));
$("user-title").tabIndex = -1;
guard(start)(); // with the key the tab keeps, or without one to find out whether the server needs one
