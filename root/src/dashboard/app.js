// The relaymesh dashboard: reads the root's API as the user who opened it
// (through `kubectl proxy`, or a browser holding the user's certificate),
// lists relays, clusters and placements, and keeps them current with the
// API's watches. It only ever sends GET requests.
"use strict";

const GROUP = "/apis/relaymesh.dev/v1alpha1";
const state = { relays: new Map(), clusters: new Map(), placements: new Map() };
const live = { relays: false, clusters: false, placements: false };

function key(object) {
  const meta = object.metadata || {};
  return meta.namespace ? meta.namespace + "/" + meta.name : meta.name;
}

// Lists `resource`, then watches it from the list's version; starts over
// (after a pause) when the watch ends or fails.
async function follow(resource) {
  const map = state[resource];
  for (;;) {
    try {
      const listed = await fetch(GROUP + "/" + resource, { headers: { Accept: "application/json" } });
      if (!listed.ok) throw new Error(resource + ": " + listed.status);
      const list = await listed.json();
      map.clear();
      for (const item of list.items || []) map.set(key(item), item);
      live[resource] = true;
      render();
      const version = (list.metadata && list.metadata.resourceVersion) || "";
      const watched = await fetch(
        GROUP + "/" + resource + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + encodeURIComponent(version));
      if (!watched.ok || !watched.body) throw new Error(resource + " watch: " + watched.status);
      const reader = watched.body.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (line) apply(map, JSON.parse(line));
        }
        render();
      }
    } catch (error) {
      console.warn(error);
    }
    live[resource] = false;
    render();
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function apply(map, event) {
  if (event.type === "ADDED" || event.type === "MODIFIED") map.set(key(event.object), event.object);
  else if (event.type === "DELETED") map.delete(key(event.object));
}

function element(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function number(name, value) {
  return element("td", { class: "number " + name }, value === undefined ? 0 : value);
}

function render() {
  const all = Object.values(live).every(Boolean);
  const connection = document.getElementById("connection");
  connection.textContent = all ? "live" : "reconnecting…";
  connection.className = "state " + (all ? "live" : "down");
  renderTree();
  renderPlacements();
  renderClusters();
}

function renderTree() {
  const children = new Map();
  const add = (parent, node) => {
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(node);
  };
  let root = null;
  for (const relay of state.relays.values()) {
    const parent = relay.spec && relay.spec.parent;
    if (parent) add(parent, { name: relay.metadata.name, agent: false, up: relay.status && relay.status.connected,
      rtt: relay.status && relay.status.rttMicros });
    else root = relay.metadata.name;
  }
  for (const cluster of state.clusters.values()) {
    const path = (cluster.status && cluster.status.relayPath) || [];
    add(path[path.length - 1], { name: cluster.metadata.name, agent: true, up: cluster.status && cluster.status.connected });
  }
  const branch = (name) => {
    const list = element("ul");
    for (const node of (children.get(name) || []).sort((a, b) => a.name.localeCompare(b.name))) {
      const item = element("li", { "data-name": node.name, class: (node.up ? "up" : "down") + (node.agent ? " agent" : "") }, node.name);
      if (node.rtt) item.append(element("span", { class: "rtt" }, " " + (node.rtt / 1000).toFixed(1) + " ms"));
      if (!node.agent) item.append(branch(node.name));
      list.append(item);
    }
    return list;
  };
  const tree = document.getElementById("tree");
  tree.replaceChildren();
  if (root) {
    const item = element("li", { "data-name": root, class: "up" }, root + " (root)");
    item.append(branch(root));
    tree.append(item);
  }
}

function renderPlacements() {
  const rows = [];
  const failing = [];
  for (const [name, placement] of [...state.placements.entries()].sort()) {
    const status = placement.status || {};
    const counts = status.clusters || {};
    const rollout = status.rollout;
    const wave = rollout ? rollout.phase + " (" + (rollout.clusters ? rollout.clusters.succeeded : 0) + " done)" : "";
    rows.push(element("tr", { "data-name": name },
      element("td", {}, name),
      number("selected", counts.selected), number("ready", counts.ready), number("applied", counts.applied),
      number("pending", counts.pending), number("failed", counts.failed), number("offline", counts.offline),
      element("td", { class: "rollout" }, wave)));
    for (const cluster of status.failing || []) {
      failing.push(element("tr", { "data-name": name + "/" + cluster.cluster },
        element("td", {}, name), element("td", { class: "failing" }, cluster.cluster), element("td", {}, cluster.message)));
    }
  }
  document.querySelector("#placements tbody").replaceChildren(...rows);
  document.querySelector("#failing tbody").replaceChildren(...failing);
}

function renderClusters() {
  const rows = [];
  for (const [name, cluster] of [...state.clusters.entries()].sort()) {
    const status = cluster.status || {};
    const labels = Object.entries((cluster.metadata && cluster.metadata.labels) || {})
      .filter(([label]) => !label.startsWith("relaymesh.dev/"))
      .map(([label, value]) => element("span", { class: "label" }, label + "=" + value));
    rows.push(element("tr", { "data-name": name },
      element("td", {}, name),
      element("td", { class: status.connected ? "up" : "down" }, status.connected ? "up" : "down"),
      element("td", {}, (status.relayPath || []).join(" › ")),
      element("td", { class: "cordoned" }, status.cordoned ? "cordoned" : ""),
      element("td", { class: "drain" }, status.drain || ""),
      element("td", { class: "labels" }, ...labels)));
  }
  document.querySelector("#clusters tbody").replaceChildren(...rows);
}

for (const resource of Object.keys(state)) follow(resource);
