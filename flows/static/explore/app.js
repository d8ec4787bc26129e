// paperlake explorer: browse and search papers, open a paper, a topic, an author or a venue,
// and see them on the map, all drawn from the JSON API under /api/. Plain browser
// JavaScript modules, no libraries: the page is served whole by `paperlake explore`.
"use strict";

import { PAGE, hitList, listing, wordsPattern } from "./cards.js";
import { $, address, api, el, fill, go, link, pathOf, plural, showError, state, topicChip } from "./common.js";
import { drawMap, highlight, mapOf, resetMap, setupMap } from "./map.js";

const FIELDS = ["q", "venue", "year", "topic", "mode"];
const TOP_VENUES = 8; // venues the front page lists before "all venues"

document.addEventListener("click", (event) => {
  const anchor = event.target.closest("a[data-nav]");
  if (!anchor || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  go(anchor.getAttribute("href"));
});
window.addEventListener("popstate", render);
window.addEventListener("explorer:navigate", render);

// Where a list starts: the page in the address (1 for none).
function offsetOf(params) {
  const page = Number(params.get("page") || 1);
  return (Number.isInteger(page) && page > 1 ? page - 1 : 0) * PAGE;
}

// A list's page from /api/papers (no query) or /api/search, highlighted on the map.
async function listed(path, params, filters, sorts) {
  const query = params.get("q");
  const asked = { ...filters, version: state.version, k: PAGE, offset: offsetOf(params), sort: params.get("sort") };
  const data = query
    ? await api("/api/search", { ...asked, q: query, mode: params.get("mode") })
    : await api("/api/papers", asked);
  await highlight(data.hits.map((h) => h.paper_id));
  const kept = Object.fromEntries([...params.entries()].filter(([key]) => key !== "page" && key !== "v"));
  const scoreTitle = query ? "cosine similarity" : "closeness to its topic's centre (cosine)";
  return { data, view: listing(data, { path, params: kept, sorts: query ? ["relevance", "year", "title"] : sorts, pattern: wordsPattern(query), scoreTitle }) };
}

function searchBox(placeholder, params) {
  const input = el("input", { type: "search", name: "q", placeholder, "aria-label": placeholder });
  return el("form", {
    class: "within", role: "search", onsubmit: (event) => {
      event.preventDefault();
      const words = input.value.trim();
      if (words) go(address("/", { ...params, q: words }));
    },
  }, input, el("button", { type: "submit" }, "Search"));
}

// Pages ----------------------------------------------------------------------------------

function bars(rows, linkOf, most) {
  const top = Math.max(...rows.map((r) => r.papers), 1);
  return el("ul", { class: "bars" }, rows.slice(0, most).map((r) => el("li", {},
    link(linkOf(r), { class: "bar-name", title: r.value }, r.value),
    el("span", { class: "meter" }, el("i", { style: `width: ${(100 * r.papers / top).toFixed(1)}%` })),
    el("span", { class: "count" }, r.papers))));
}

async function overviewPage() {
  const data = await api("/api/overview", { version: state.version });
  await highlight([]);
  const venues = data.venues.length ? el("div", { class: "panel", id: "venues" },
    el("h2", {}, plural(data.venues.length, "venue")),
    bars(data.venues, (v) => address(pathOf.venue(v.value)), TOP_VENUES),
    data.venues.length > TOP_VENUES ? allVenues(data.venues) : null) : null;
  const years = [...data.years].sort((a, b) => Number(a.value) - Number(b.value));
  const peak = Math.max(...years.map((y) => y.papers), 1);
  fill($("#content"),
    el("div", { class: "panel" },
      el("div", { class: "stats" },
        el("span", {}, el("b", {}, data.papers), "papers"),
        el("span", {}, el("b", {}, data.topics.length), "topics"),
        el("span", {}, el("b", {}, data.venues.length), data.venues.length === 1 ? "venue" : "venues"),
        el("span", {}, el("b", {}, `v${data.version}`), "version")),
      el("p", { class: "summary" }, "Search by meaning or by words above, ",
        link(address("/", { sort: "year" }), "browse every paper"),
        ", open a topic, venue or year below, or click a point on the map.")),
    el("div", { class: "panel" }, el("h2", {}, "Topics"),
      el("div", { class: "topics" }, data.topics.map((t) => el("span", {}, topicChip(t.topic_id, t.label), el("span", { class: "muted" }, ` ${t.papers}`))))),
    venues,
    years.length ? el("div", { class: "panel", id: "years" }, el("h2", {}, "Years"),
      el("div", { class: "histogram" }, years.map((y) => link(address("/", { year: y.value }),
        { class: "column", title: `${y.value}: ${plural(y.papers, "paper")}` },
        el("i", { style: `height: ${(100 * y.papers / peak).toFixed(1)}%` }),
        el("span", {}, String(y.value).slice(-2)))))) : null);
}

// Every venue, filtered as one types.
function allVenues(venues) {
  const list = el("ul", { class: "venue-list" }, venues.map((v) => el("li", { "data-name": v.value.toLowerCase() },
    link(address(pathOf.venue(v.value)), v.value), el("span", { class: "muted" }, ` ${v.papers}`))));
  const filter = el("input", { type: "search", placeholder: "Filter venues…", "aria-label": "Filter venues" });
  filter.addEventListener("input", () => {
    const words = filter.value.trim().toLowerCase();
    for (const item of list.children) item.hidden = words !== "" && !item.dataset.name.includes(words);
  });
  return el("details", { class: "all-venues" }, el("summary", {}, `All ${venues.length} venues`), filter, list);
}

async function listPage(params) {
  const filters = Object.fromEntries(["venue", "year", "topic"].map((k) => [k, params.get(k)]));
  if (params.get("q") && !params.get("page")) fill($("#content"), el("p", { class: "summary" }, "Searching…"));
  const { data, view } = await listed("/", params, filters, ["year", "title", "centre"]);
  const chosen = Object.entries(data.filters).filter(([, v]) => v !== null).map(([key, value]) => {
    const named = key === "topic" ? `topic “${state.topics.get(Number(value))?.name ?? value}”` : `${key} ${value}`;
    return el("span", { class: "filter" }, named, link(address("/", Object.fromEntries(
      [...params.entries()].filter(([k]) => k !== key && k !== "page" && k !== "v"))), { title: "remove this filter" }, " ×"));
  });
  const what = data.query ? [`Search for “${data.query}”`, chosen.length ? " in " : ""]
    : ["Browsing ", chosen.length ? "papers of " : "every paper"];
  fill($("#content"),
    el("p", { class: "summary" }, ...what, ...chosen, data.took_ms !== undefined ? ` · ${data.took_ms} ms` : ""),
    data.no_good_match ? el("div", { class: "weak" }, data.hits.length
      ? `No good match: ${data.why.replace(/^no good match: /, "")}. The closest papers follow.`
      : "Nothing matches the filters. Try fewer filters.") : null,
    view);
}

async function topicPage(topicId, params) {
  const topic = await api("/api/topic/" + encodeURIComponent(topicId), { version: state.version });
  const { view } = await listed(pathOf.topic(topicId), params, { topic: topicId }, ["centre", "year", "title"]);
  const named = state.topics.get(topic.topic_id) || { name: topic.label, colour: state.map.no_value_colour };
  fill($("#content"),
    el("div", { class: "panel", id: "topic-head" },
      el("h1", {}, el("span", { class: "dot", style: `background: ${named.colour}` }), named.name),
      el("p", { class: "muted" }, `${plural(topic.papers, "paper")} · ${topic.label} · terms: ${(topic.terms || []).join(", ")}`),
      searchBox("Search within this topic…", { topic: topic.topic_id })),
    view);
}

async function venuePage(name, params) {
  const venue = await api("/api/venue/" + encodeURIComponent(name), { version: state.version });
  const { view } = await listed(pathOf.venue(name), params, { venue: name }, ["year", "title", "centre"]);
  const peak = Math.max(...venue.years.map((y) => y.papers), 1);
  fill($("#content"),
    el("div", { class: "panel", id: "venue-head" },
      el("h1", {}, venue.venue),
      el("p", { class: "muted" }, `${plural(venue.papers, "paper")} in ${plural(venue.years.length, "year")}`),
      el("table", { class: "years" },
        el("thead", {}, el("tr", {}, ["year", "papers", "", "with code", "topics"].map((h) => el("th", {}, h)))),
        el("tbody", {}, venue.years.map((y) => el("tr", { "data-year": y.year ?? "" },
          el("td", {}, y.year === null ? "no year" : link(address("/", { venue: name, year: y.year }), y.year)),
          el("td", { class: "count" }, y.papers),
          el("td", { class: "meter-cell" }, el("span", { class: "meter" }, el("i", { style: `width: ${(100 * y.papers / peak).toFixed(1)}%` }))),
          el("td", { class: "count" }, y.papers_with_code), el("td", { class: "count" }, y.topics))))),
      el("div", { class: "topics" }, venue.topics.map((t) => el("span", {}, topicChip(t.topic_id, t.label), el("span", { class: "muted" }, ` ${t.papers}`)))),
      searchBox("Search within this venue…", { venue: name })),
    view);
}

async function authorPage(key, params) {
  const author = await api("/api/author/" + encodeURIComponent(key), { version: state.version });
  const { view } = await listed(pathOf.author(key), params, { author: key }, ["year", "title"]);
  const others = author.spellings.filter((s) => s !== author.name);
  fill($("#content"),
    el("div", { class: "panel", id: "author-head" },
      el("h1", {}, author.name),
      others.length ? el("p", { class: "muted" }, "Also written " + others.map((s) => `“${s}”`).join(", ")) : null,
      el("p", { class: "muted" }, plural(author.papers, "paper"),
        author.years.length ? ` · ${author.years[0]}${author.years.length > 1 ? "–" + author.years.at(-1) : ""}` : ""),
      author.venues.length ? el("p", { class: "venues" }, "Venues: ",
        author.venues.flatMap((v, i) => [i ? ", " : "", link(address(pathOf.venue(v)), v)])) : null,
      author.co_authors.length ? el("p", { class: "co-authors" }, "With: ",
        author.co_authors.flatMap((c, i) => [i ? ", " : "", link(address(pathOf.author(c.author_key)), c.name),
          c.papers > 1 ? el("span", { class: "muted" }, ` (${c.papers})`) : ""])) : null),
    view);
}

async function paperPage(paperId) {
  const paper = await api("/api/paper/" + encodeURIComponent(paperId), { version: state.version });
  await highlight(paper.nearest.map((n) => n.paper_id), paper.paper_id);
  const facts = [paper.venue ? link(address(pathOf.venue(paper.venue)), paper.venue) : null, paper.year, paper.decision]
    .filter((v) => v !== null && v !== undefined).flatMap((v, i) => (i ? [" · ", v] : [v]));
  const authors = (paper.authors || []).flatMap((name, i) => [i ? ", " : "",
    paper.author_keys[i] ? link(address(pathOf.author(paper.author_keys[i])), { class: "author" }, name) : name]);
  const sources = el("table", { class: "sources" },
    el("thead", {}, el("tr", {}, ["file", "format", "record", "line", "byte", "sha256"].map((h) => el("th", {}, h)))),
    el("tbody", {}, paper.sources.map((s) => el("tr", {},
      el("td", { class: "path" }, s.source_path, s.first ? "" : el("span", { class: "muted" }, " (again)")),
      el("td", {}, s.format || ""), el("td", {}, s.record_no), el("td", {}, s.line),
      el("td", {}, s.byte_offset), el("td", {}, el("code", { title: s.source_sha256 }, (s.source_sha256 || "").slice(0, 12)))))));
  fill($("#content"),
    el("article", { class: "panel paper", "data-paper": paper.paper_id },
      el("h1", { class: paper.untitled ? "untitled" : null }, paper.title),
      paper.untitled ? el("p", { class: "muted" }, "No title in the source: named by its abstract's first words.") : null,
      authors.length ? el("p", { class: "authors" }, authors) : null,
      el("div", { class: "meta" }, el("span", {}, facts), topicChip(paper.topic_id, paper.topic),
        el("code", { title: "paper id" }, paper.paper_id),
        paper.external_id ? el("span", {}, "id ", el("code", {}, paper.external_id)) : null,
        el("span", {}, `${paper.word_count} words`)),
      paper.links.length ? el("div", { class: "links" }, paper.links.map((l) =>
        el("a", { href: l.url, target: "_blank", rel: "noopener", title: l.url }, `${l.kind} ↗`))) : null,
      paper.keywords && paper.keywords.length ? el("p", { class: "keywords" }, "Keywords: " + paper.keywords.join(", ")) : null,
      el("p", { class: "full" }, paper.abstract)),
    el("section", { class: "panel compact", id: "nearest" },
      el("h2", {}, `${paper.nearest.length} nearest papers`),
      paper.nearest.length ? hitList(paper.nearest) : el("p", { class: "muted" }, "None.")),
    el("section", { class: "panel compact", id: "duplicates" },
      el("h2", {}, "Near-duplicates"),
      paper.duplicates.length
        ? hitList(paper.duplicates, (d) => el("span", {}, d.kind || `group of ${d.group_size}`))
        : el("p", { class: "muted" }, "None: no other paper of this version is a near-duplicate of it.")),
    el("section", { class: "panel", id: "sources" },
      el("h2", {}, paper.sources.length === 1 ? "Read from" : `Read from ${paper.sources.length} records`),
      sources));
}

// Versions, filters and the router --------------------------------------------------------

// A version's map, drawn as soon as it comes, then the venues and years its filters offer:
// asked for after the map, so that the explorer, which answers one request at a time, reads
// the map first and the overview while the page draws it.
async function loadVersion(version) {
  state.version = version;
  const map = await mapOf(version);
  state.map = map;
  state.topics = new Map(map.topics.map((t) => [t.topic_id, t]));
  fillSelect($("#topic"), "any topic", map.topics.map((t) => [t.topic_id, `${t.name} (${t.papers})`]));
  resetMap();
  drawMap();
  const overview = await api("/api/overview", { version });
  fillSelect($("#venue"), "any venue", overview.venues.map((v) => [v.value, `${v.value} (${v.papers})`]));
  fillSelect($("#year"), "any year", overview.years.map((y) => [y.value, `${y.value} (${y.papers})`]));
}

function fillSelect(select, anyLabel, options) {
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, anyLabel),
    ...options.map(([value, label]) => el("option", { value }, label)));
  select.value = options.some(([value]) => String(value) === chosen) ? chosen : "";
}

const PAGES = [
  ["/paper/", (rest) => paperPage(rest)],
  ["/topic/", (rest, params) => topicPage(rest, params)],
  ["/venue/", (rest, params) => venuePage(rest, params)],
  ["/author/", (rest, params) => authorPage(rest, params)],
];
const LISTS = ["q", "venue", "year", "topic", "sort", "page"]; // "/" with any of them lists papers

async function render() {
  showError(null);
  const params = new URLSearchParams(location.search);
  const path = location.pathname;
  const wanted = params.has("v") ? Number(params.get("v")) : state.defaultVersion;
  try {
    if (wanted !== state.version) {
      $("#version").value = String(wanted);
      await loadVersion(wanted);
    }
    for (const key of FIELDS) $("#" + key).value = params.get(key) || (key === "mode" ? "hybrid" : "");
    const page = PAGES.find(([prefix]) => path.startsWith(prefix));
    if (page) await page[1](decodeURIComponent(path.slice(page[0].length)), params);
    else if (LISTS.some((key) => params.get(key))) await listPage(params);
    else await overviewPage();
    window.scrollTo(0, 0);
  } catch (error) {
    showError(error.message);
    fill($("#content"));
  }
}

async function start() {
  setupMap();
  $("#search").addEventListener("submit", (event) => {
    event.preventDefault();
    const fields = Object.fromEntries(FIELDS.map((k) => [k, $("#" + k).value.trim()]));
    if (fields.mode === "hybrid" || !fields.q) delete fields.mode;
    go(address("/", Object.values(fields).some(Boolean) ? fields : { sort: "year" }));
  });
  $("#version").addEventListener("change", (event) => {
    state.version = null; // reload the chosen version
    const version = Number(event.target.value);
    const params = new URLSearchParams(location.search);
    if (version === state.defaultVersion) params.delete("v"); else params.set("v", version);
    const text = params.toString();
    go(text ? `${location.pathname}?${text}` : location.pathname);
  });
  try {
    const versions = await api("/api/versions");
    $("#version").replaceChildren(...versions.versions.map((v) =>
      el("option", { value: v.version }, `v${v.version} · ${v.published}${v.papers !== null ? ` · ${v.papers} papers` : ""}`)));
  } catch (error) {
    showError(error.message);
  }
  await render();
}

start();
