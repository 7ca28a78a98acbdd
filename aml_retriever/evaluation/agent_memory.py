"""Agent memory suite: does recall put the right version of a changing fact first?

An agent's long-term memory holds facts that change: "The project targets Python 3.10." and, months
later, "The project targets Python 3.12.". Agents rarely announce the change. Most later versions
are plain restatements, written as if nothing had been said before, and a question asks "What
Python version does the project target?" without "now" or "currently". Supersession therefore has
to work without change words: the newest version must rank above the versions it replaced even
when neither the statement nor the question says that anything changed. A minority of versions
do say it ("switched to", "replaced X with Y", "moved from X to Y", "is now"), and about a third
carry their own date ("Since March 2024 ...", "As of 2025-01, ...").

The suite generates, from a seed alone, a scenario of project facts (local memory) and user facts
(global memory). Each chosen topic changes two to four times; topics are interleaved in the order
they are remembered and mixed with unrelated statements that share words with them ("project",
"user", "uses", "database"). Two styles word the versions of a fact:

  restated     (the default, and what the targets are measured on) as agents write them: every
               version of a topic names the same subject ("the caching backend", "the project
               targets"), drawn from a few templates per topic that all carry the topic's subject
               words, so consecutive versions are often the same sentence with a new value ("The
               project targets Python 3.10." -> "The project targets Python 3.12."); change
               versions keep the subject too ("Caching moved from Redis to KeyDB."). Every
               question carries the subject words, so each version of the fact is lexically
               findable and the suite measures the choice between versions.
  paraphrased  every version of a topic in a different sentence, often sharing no word with the
               other versions or the question ("API keys live in HashiCorp Vault." then
               "Credentials are loaded from Infisical at startup."). That measures paraphrase,
               which a lexical retriever cannot bridge: the lexical floor, not a target.

Questions:

  current   the present value, asked without any word that points at the present; expected: the
            newest version. `stale first` is the share whose first result is an older version of
            the same fact: the failure this suite exists to expose.
  past      the past named explicitly, by kind:
              first    "originally", "at first", "initially", "first": the oldest version
              before   "before <newest value>", "previously", "used to": the version just before
                       the newest
              year     "in <year>": the latest version dated in or before that year (asked only
                       when that version carries its date in its text)

Recall runs over both memories at once, as an agent calls it. Per category it reports first-rank
accuracy (the expected statement first), MRR and R@5, and what came first instead: an older
version (stale), a newer one, or no version of the fact at all (off topic: a vocabulary miss, not
a choice between versions). Paraphrased current questions prefer wording that shares a content word
with the newest version; restated ones share the subject words with every version. Every statement
and question is generated here (`random.Random(seed)` only): the suite reads no benchmark data and
no file.

The evaluator drives any memory through two callables, remember(content, scope) -> statement id
and recall(query, limit) -> statement ids best first; `scoped_memory` builds them over the
project's ScopedMemory in a temporary directory.

    python -m aml_retriever.evaluation.agent_memory --seeds 1,2,3 --topics 40
        [--style restated|paraphrased|both] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aml_retriever.agents.scopes import ScopedMemory
from aml_retriever.evaluation.report import fmt, table

Remember = Callable[[str, str], str]
Recall = Callable[[str, int], Sequence[str]]

CATEGORIES = ("current", "past")
# How the versions of a fact are worded (see the module docstring); the first is the default.
STYLES = ("restated", "paraphrased")
PAST_KINDS = ("first", "before", "year")
# Words that point at the present. A current question containing one would hand the memory a
# cue that real agents rarely give, so no current question uses them.
PRESENT_WORDS = ("now", "currently", "current", "these days", "at the moment", "still", "latest",
                 "most recent", "nowadays", "today", "anymore", "presently")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")

VERSIONS = (3, 5)  # inclusive: each chosen topic changes two to four times
DISTRACTORS = (30, 60)  # inclusive: unrelated statements mixed into the memory
# Most versions are plain restatements; only some say that something changed.
CHANGE_SHARE = 0.3
DATED_SHARE = 1 / 3
FIRST_YEARS = (2019, 2021)  # inclusive: when a topic's first version was written
MONTHS_BETWEEN = (3, 14)  # inclusive: months from one version of a topic to the next
FIRST_WHEN = ("originally", "at first", "initially", "first")
BEFORE_WHEN = ("before {newest}", "previously")
USED_TO = "What used to be {noun}?"
# Words that say nothing about which fact a question asks: question words, function words, and
# "user" and "project", which every statement of their scope carries.
OVERLAP_STOP = frozenset("""
a an and are as at be by did do doe for from go goe ha have in into is it its of on or our that the
this to us use was we were what when where which who whom how user project
""".split())

# Change statements that fit any project fact; user facts read oddly as "switched the user's
# city", so they get only the two neutral forms and their own wording per topic.
LOCAL_CHANGES = ("{Noun} is now {v}.", "{Noun} changed from {old} to {v}.",
                 "Switched {noun} from {old} to {v}.", "Replaced {old} with {v} as {noun}.",
                 "{Noun} moved from {old} to {v}.")
GLOBAL_CHANGES = ("{Noun} is now {v}.", "{Noun} changed from {old} to {v}.")


@dataclass(frozen=True)
class Topic:
    """One fact that can change: its values, how a statement says it, how a question asks it."""

    key: str
    scope: str
    noun: str  # "the caching backend": what change statements and "used to" questions name
    values: tuple[str, ...]
    plain: tuple[str, ...]  # restatements with {v} and no change word
    current: tuple[str, ...]  # questions about the present value, with no present-pointing word
    past: str  # a question in the past tense with a {when} slot ("originally", "in 2023")
    changes: tuple[str, ...] = ()  # the topic's own change statements ({v}, optionally {old})
    generic: bool = True  # whether the scope's generic change statements read well for it
    ordered: bool = False  # values only ever move forward (versions of a language)


def _owner(module: str) -> Topic:
    return Topic(
        f"owner_{module}", "local", f"the code owner of the {module} module",
        ("Priya Raman", "Marco Bellini", "Aiko Tanaka", "Tomasz Nowak", "Fatima Haddad", "Lukas Meier",
         "Chen Wei", "Ingrid Solberg"),
        (f"{{v}} owns the {module} module.", f"The {module} module is maintained by {{v}}.",
         f"Questions about the {module} code go to {{v}}.", f"Code owner of the {module} module: {{v}}."),
        (f"Who owns the {module} module?", f"Who maintains the {module} code?",
         f"Who is the code owner for {module}?"),
        f"Who owned the {module} module {{when}}?",
        changes=(f"{{v}} took over the {module} module from {{old}}.",))


TOPICS: tuple[Topic, ...] = (
    # ---- project facts (local memory) ---------------------------------------------------------
    Topic("python", "local", "the project's Python version",
          ("Python 3.8", "Python 3.9", "Python 3.10", "Python 3.11", "Python 3.12", "Python 3.13"),
          ("The project targets {v}.", "We build and test against {v}.",
           "{v} is the interpreter version for this project.", "The codebase runs on {v}."),
          ("What Python version does the project target?", "Which Python version do we build against?",
           "Which interpreter version does the codebase run on?"),
          "Which Python version did the project target {when}?",
          changes=("Bumped the project to {v}.", "Upgraded the interpreter from {old} to {v}."),
          ordered=True),
    Topic("cache", "local", "the caching backend",
          ("Redis", "Memcached", "Varnish", "Hazelcast", "DragonflyDB", "KeyDB"),
          ("We cache with {v}.", "{v} is our caching layer.", "The caching backend is {v}.",
           "Responses are cached in {v}."),
          ("Which caching backend do we use?", "What do we cache responses in?",
           "What is the cache layer of the service?"),
          "Which caching backend did we use {when}?",
          changes=("Switched the cache to {v}.",)),
    Topic("database", "local", "the main database",
          ("PostgreSQL", "MySQL", "SQLite", "MariaDB", "CockroachDB", "MongoDB"),
          ("Our primary database is {v}.", "The app stores its data in {v}.",
           "We run {v} as the main datastore.", "Persistent data lives in {v}."),
          ("Which database does the app use?", "Where does the application store its data?",
           "What is the main datastore?"),
          "Which database did the app use {when}?",
          changes=("Migrated the data from {old} to {v}.",)),
    Topic("ci", "local", "the CI system",
          ("GitHub Actions", "GitLab CI", "Jenkins", "CircleCI", "Buildkite", "Travis CI", "Drone"),
          ("CI runs on {v}.", "Our pipelines are defined in {v}.", "Every pull request is built by {v}.",
           "{v} runs the test pipeline."),
          ("Which CI system runs our builds?", "What builds the pull requests?",
           "Where do the pipelines run?"),
          "Which CI system ran our builds {when}?"),
    Topic("deploy", "local", "the deploy target",
          ("Fly.io", "Heroku", "AWS ECS", "Google Cloud Run", "Render", "a Kubernetes cluster on GKE"),
          ("We deploy to {v}.", "Production is hosted on {v}.", "The service ships to {v}.",
           "Releases go out to {v}."),
          ("Where do we deploy?", "Where is production hosted?", "What is the deploy target?"),
          "Where did we deploy {when}?",
          changes=("Moved production from {old} to {v}.",)),
    Topic("tests", "local", "the test framework",
          ("pytest", "unittest", "nose2", "ward", "Robot Framework", "doctest"),
          ("Tests are written with {v}.", "The test suite uses {v}.", "We run the tests under {v}.",
           "{v} is the test runner."),
          ("Which test framework do the tests use?", "What runs the test suite?",
           "What are the tests written with?"),
          "Which test framework did the tests use {when}?"),
    Topic("linter", "local", "the linter",
          ("ruff", "flake8", "pylint", "pyflakes", "prospector", "pycodestyle"),
          ("The linter is {v}.", "Code is linted with {v}.", "{v} checks the code on every push.",
           "We lint with {v}."),
          ("Which linter do we use?", "What lints the code?", "Which tool checks the code on push?"),
          "Which linter did we use {when}?"),
    Topic("formatter", "local", "the formatter",
          ("black", "ruff format", "yapf", "autopep8", "blue"),
          ("Code is formatted with {v}.", "{v} formats the codebase.", "The formatter is {v}.",
           "We run {v} before committing."),
          ("Which formatter do we use?", "What formats the code?",
           "Which code formatter runs before commits?"),
          "Which formatter did we use {when}?"),
    Topic("packages", "local", "the package manager",
          ("pip", "Poetry", "uv", "PDM", "Pipenv", "Hatch", "conda"),
          ("Dependencies are managed with {v}.", "We install packages with {v}.",
           "The package manager is {v}.", "{v} handles the lock file."),
          ("Which package manager does the project use?", "How are dependencies installed?",
           "What manages the dependencies?"),
          "Which package manager did the project use {when}?"),
    Topic("license", "local", "the project license",
          ("MIT", "Apache-2.0", "GPL-3.0", "BSD-3-Clause", "MPL-2.0", "LGPL-3.0"),
          ("The project is licensed under {v}.", "The code ships under the {v} license.",
           "{v} is the project license.", "Our license is {v}."),
          ("What license does the project use?", "Under which license is the code released?",
           "Which license applies to the code?"),
          "What license did the project use {when}?",
          changes=("Relicensed the project from {old} to {v}.",)),
    Topic("branch", "local", "the default branch",
          ("main", "master", "trunk", "develop", "stable", "production"),
          ("The default branch is {v}.", "Pull requests target the {v} branch.", "We merge into {v}.",
           "{v} is the branch releases are cut from."),
          ("What is the default branch?", "Which branch do pull requests target?",
           "Which branch do we merge into?"),
          "What was the default branch {when}?",
          changes=("Renamed the default branch from {old} to {v}.",)),
    Topic("cadence", "local", "the release cadence",
          ("weekly", "every two weeks", "monthly", "quarterly", "every six weeks",
           "on every merge to the default branch"),
          ("We release {v}.", "Releases ship {v}.", "A new version goes out {v}.",
           "The plan is to cut a release {v}."),
          ("How often do we release?", "What is the release cadence?", "How often does a new version ship?"),
          "How often did we release {when}?",
          changes=("We moved from releasing {old} to releasing {v}.", "Releases switched to {v}."),
          generic=False),
    Topic("api", "local", "the API framework",
          ("FastAPI", "Flask", "Django REST Framework", "Starlette", "Litestar", "aiohttp", "Falcon"),
          ("The API is built with {v}.", "Our HTTP endpoints are written in {v}.", "{v} serves the REST API.",
           "The backend API uses {v}."),
          ("Which framework is the API built with?", "What serves the REST endpoints?",
           "Which web framework does the backend API use?"),
          "Which framework was the API built with {when}?",
          changes=("Rewrote the API from {old} to {v}.",)),
    Topic("frontend", "local", "the frontend framework",
          ("React", "Vue", "Svelte", "Angular", "SolidJS", "htmx", "Preact"),
          ("The frontend is written in {v}.", "The web UI uses {v}.", "{v} renders the dashboard.",
           "We build the client side with {v}."),
          ("Which frontend framework do we use?", "What is the web UI written in?",
           "What renders the dashboard?"),
          "Which frontend framework did we use {when}?"),
    Topic("queue", "local", "the message queue",
          ("RabbitMQ", "Kafka", "Amazon SQS", "NATS", "Redis Streams", "Google Pub/Sub", "ZeroMQ"),
          ("Background jobs go through {v}.", "Our message queue is {v}.", "Events are published to {v}.",
           "Workers consume tasks from {v}."),
          ("Which message queue do we use?", "Where are events published?",
           "What do the workers consume tasks from?"),
          "Which message queue did we use {when}?"),
    Topic("containers", "local", "the container runtime",
          ("Docker", "Podman", "containerd", "CRI-O", "LXC", "Firecracker"),
          ("Containers run on {v}.", "We build and run images with {v}.", "The container runtime is {v}.",
           "Local services start under {v}."),
          ("Which container runtime do we use?", "What runs our containers?",
           "What do we build images with?"),
          "Which container runtime did we use {when}?"),
    Topic("region", "local", "the cloud region",
          ("eu-west-1", "us-east-1", "eu-central-1", "us-west-2", "ap-southeast-1", "eu-north-1"),
          ("Infrastructure lives in {v}.", "The servers are in the {v} region.", "We host everything in {v}.",
           "{v} is the primary cloud region."),
          ("Which cloud region hosts the infrastructure?", "Where are the servers located?",
           "What is the primary region?"),
          "Which cloud region hosted the infrastructure {when}?"),
    Topic("logs", "local", "the log format",
          ("JSON lines", "logfmt", "plain text", "the Common Log Format", "GELF", "OpenTelemetry records"),
          ("Logs are written as {v}.", "Services emit {v} logs.", "The log format is {v}.",
           "We log in {v}."),
          ("What format are the logs in?", "Which log format do the services emit?",
           "How are logs formatted?"),
          "What format were the logs in {when}?"),
    Topic("docs", "local", "the docs tool",
          ("Sphinx", "MkDocs", "Docusaurus", "mdBook", "Hugo", "pdoc", "Jekyll"),
          ("Documentation is built with {v}.", "The docs site uses {v}.", "{v} generates the reference docs.",
           "We write the docs in {v}."),
          ("Which tool builds the documentation?", "What generates the docs site?",
           "What is the documentation tool?"),
          "Which tool built the documentation {when}?"),
    _owner("billing"),
    _owner("auth"),
    _owner("search"),
    Topic("orm", "local", "the ORM",
          ("SQLAlchemy", "the Django ORM", "Peewee", "Tortoise ORM", "SQLModel", "Pony ORM"),
          ("Database access goes through {v}.", "The models are defined with {v}.", "The ORM is {v}.",
           "Queries are built with {v}."),
          ("Which ORM do we use?", "What are the models defined with?",
           "How does the code access the database?"),
          "Which ORM did we use {when}?"),
    Topic("types", "local", "the type checker",
          ("mypy", "pyright", "pyre", "pytype", "basedpyright"),
          ("Types are checked with {v}.", "{v} runs the type check in CI.", "The type checker is {v}.",
           "We type-check the code with {v}."),
          ("Which type checker do we use?", "What checks the types?", "What runs the type check?"),
          "Which type checker did we use {when}?"),
    Topic("monitoring", "local", "the monitoring stack",
          ("Prometheus", "Datadog", "New Relic", "Grafana Cloud", "Honeycomb", "Zabbix"),
          ("Metrics are collected by {v}.", "We monitor the services with {v}.",
           "The dashboards live in {v}.", "{v} alerts us when latency rises."),
          ("What do we monitor the services with?", "Where are the metrics collected?",
           "Which monitoring tool sends the alerts?"),
          "What did we monitor the services with {when}?"),
    Topic("errors", "local", "the error tracker",
          ("Sentry", "Rollbar", "Bugsnag", "Honeybadger", "Airbrake", "GlitchTip"),
          ("Exceptions are reported to {v}.", "Crashes show up in {v}.", "The error tracker is {v}.",
           "{v} collects the stack traces from production."),
          ("Where are exceptions reported?", "Which error tracker do we use?",
           "What collects the stack traces?"),
          "Where were exceptions reported {when}?"),
    Topic("tasks", "local", "the task runner",
          ("Make", "just", "nox", "tox", "invoke", "Taskfile"),
          ("Developer tasks are defined in {v}.", "We run the common commands through {v}.",
           "The task runner is {v}.", "{v} wraps the build and test commands."),
          ("Which task runner do we use?", "Where are the developer tasks defined?",
           "What wraps the build commands?"),
          "Which task runner did we use {when}?"),
    Topic("secrets", "local", "the secrets manager",
          ("HashiCorp Vault", "AWS Secrets Manager", "Doppler", "1Password", "SOPS", "Infisical"),
          ("Secrets are kept in {v}.", "API keys live in {v}.", "The secrets manager is {v}.",
           "Credentials are loaded from {v} at startup."),
          ("Where are the secrets kept?", "Which secrets manager do we use?", "Where do API keys live?"),
          "Where were the secrets kept {when}?"),
    Topic("issues", "local", "the issue tracker",
          ("Jira", "Linear", "GitHub Issues", "YouTrack", "Shortcut", "Trello"),
          ("Bugs are tracked in {v}.", "The backlog lives in {v}.", "The issue tracker is {v}.",
           "We file tickets in {v}."),
          ("Where are bugs tracked?", "Which issue tracker do we use?", "Where do we file tickets?"),
          "Where were bugs tracked {when}?"),
    Topic("search_engine", "local", "the search engine",
          ("Elasticsearch", "OpenSearch", "Meilisearch", "Typesense", "Solr", "Postgres full-text search"),
          ("Product search runs on {v}.", "The search index is served by {v}.", "The search engine is {v}.",
           "Full-text queries go to {v}."),
          ("Which search engine powers product search?", "What serves the search index?",
           "Where do full-text queries go?"),
          "Which search engine powered product search {when}?"),
    # ---- user facts (global memory) -----------------------------------------------------------
    Topic("city", "global", "the user's city",
          ("Berlin", "Lisbon", "Toronto", "Melbourne", "Austin", "Warsaw", "Osaka", "Dublin"),
          ("The user lives in {v}.", "The user is based in {v}.", "Home for the user is {v}.",
           "The user's flat is in {v}."),
          ("Where does the user live?", "Which city is the user based in?", "What city is the user's home?"),
          "Where did the user live {when}?",
          changes=("The user moved to {v}.", "The user relocated from {old} to {v}.",
                   "The user moved from {old} to {v}.")),
    Topic("employer", "global", "the user's employer",
          ("Acme Corp", "Globex", "Initech", "Umbrella Labs", "Stark Industries", "Hooli", "Vandelay Import"),
          ("The user works at {v}.", "The user's employer is {v}.", "The user is employed by {v}.",
           "{v} pays the user's salary."),
          ("Where does the user work?", "Who employs the user?", "Which company is the user's employer?"),
          "Where did the user work {when}?",
          changes=("The user joined {v}.", "The user left {old} for {v}.")),
    Topic("team", "global", "the user's team",
          ("platform", "payments", "growth", "data infrastructure", "mobile", "security",
           "developer tooling"),
          ("The user is on the {v} team.", "The user's team is {v}.", "The user works in the {v} group.",
           "The user sits with the {v} engineers."),
          ("Which team is the user on?", "What team does the user belong to?",
           "Which group does the user work in?"),
          "Which team was the user on {when}?",
          changes=("The user transferred to the {v} team.", "The user moved from the {old} team to {v}.")),
    Topic("editor", "global", "the user's editor",
          ("VS Code", "Neovim", "Emacs", "PyCharm", "Helix", "Zed", "Sublime Text"),
          ("The user edits code in {v}.", "{v} is the user's editor of choice.",
           "The user's preferred editor is {v}.", "The user opens every file in {v}."),
          ("Which editor does the user prefer?", "What editor does the user use?",
           "What does the user edit code in?"),
          "Which editor did the user prefer {when}?",
          changes=("The user switched to {v}.", "The user replaced {old} with {v}.")),
    Topic("language", "global", "the user's favourite programming language",
          ("Python", "Rust", "Go", "TypeScript", "Kotlin", "Elixir", "OCaml"),
          ("The user's favourite programming language is {v}.", "The user prefers writing {v}.",
           "{v} is the language the user likes best.", "Given a choice, the user writes {v}."),
          ("Which programming language does the user prefer?", "What is the user's favourite language?",
           "What language does the user like to write?"),
          "Which programming language did the user prefer {when}?"),
    Topic("timezone", "global", "the user's timezone",
          ("UTC", "CET", "Eastern Time", "Pacific Time", "JST", "AEST", "IST"),
          ("The user's timezone is {v}.", "The user keeps their calendar in {v}.",
           "Times for the user should be given in {v}.", "The user's clock is set to {v}."),
          ("What timezone is the user in?", "Which timezone should times be given in for the user?",
           "What is the user's calendar timezone?"),
          "What timezone was the user in {when}?"),
    Topic("shell", "global", "the user's shell",
          ("zsh", "bash", "fish", "nushell", "PowerShell", "xonsh"),
          ("The user's shell is {v}.", "The user runs {v} in the terminal.", "Terminal sessions use {v}.",
           "The user's favourite shell is {v}."),
          ("Which shell does the user use?", "What is the user's favourite shell?",
           "What runs in the user's terminal?"),
          "Which shell did the user use {when}?",
          changes=("The user switched the login shell to {v}.",)),
    Topic("laptop", "global", "the operating system on the user's laptop",
          ("macOS", "Ubuntu", "Fedora", "Windows 11", "Arch Linux", "NixOS", "Debian"),
          ("The user's laptop runs {v}.", "The user works on a {v} laptop.",
           "{v} is the operating system on the user's laptop.", "The user's machine has {v} installed."),
          ("Which operating system is on the user's laptop?", "What OS does the user's laptop run?",
           "What does the user's machine run?"),
          "What OS did the user's laptop run {when}?",
          changes=("The user reinstalled the laptop with {v}.",
                   "The user moved the laptop from {old} to {v}.")),
    Topic("hours", "global", "the user's working schedule",
          ("9 to 5", "10 to 6", "8 to 4", "7 to 3", "noon to 8", "11 to 7"),
          ("The user works {v}.", "The user's working hours are {v}.", "The user is available {v}.",
           "The user keeps office hours of {v}."),
          ("What are the user's working hours?", "When is the user available?", "When does the user work?"),
          "What were the user's working hours {when}?"),
    Topic("manager", "global", "the user's manager",
          ("Dana Whitfield", "Oskar Lind", "Maya Patel", "Jonas Berg", "Elena Rossi", "Sam Okafor",
           "Hana Sato"),
          ("The user's manager is {v}.", "The user reports to {v}.", "{v} manages the user.",
           "The user's line manager is {v}."),
          ("Who is the user's manager?", "Who does the user report to?", "Who manages the user?"),
          "Who was the user's manager {when}?",
          changes=("The user's reporting line moved from {old} to {v}.",)),
    Topic("role", "global", "the user's role",
          ("backend engineer", "staff engineer", "engineering manager", "data scientist",
           "site reliability engineer", "tech lead", "product engineer"),
          ("The user's role is {v}.", "The user's job title is {v}.", "The user works as {v}.",
           "The user holds the {v} position."),
          ("What is the user's role?", "What is the user's job title?", "What does the user work as?"),
          "What was the user's role {when}?",
          changes=("The user was promoted to {v}.", "The user went from {old} to {v}.")),
    Topic("keyboard", "global", "the user's keyboard layout",
          ("QWERTY", "Dvorak", "Colemak", "AZERTY", "QWERTZ", "Workman"),
          ("The user types on {v}.", "The user's keyboard layout is {v}.",
           "The user's keyboard is set to {v}.",
           "The user learned to type fast on {v}."),
          ("Which keyboard layout does the user type on?", "What is the user's keyboard layout?",
           "What layout is the user's keyboard set to?"),
          "Which keyboard layout did the user type on {when}?"),
    Topic("browser", "global", "the user's browser",
          ("Firefox", "Chrome", "Safari", "Brave", "Arc", "Vivaldi", "Edge"),
          ("The user browses with {v}.", "The user's browser is {v}.", "Links for the user open in {v}.",
           "{v} is the user's default browser."),
          ("Which browser does the user use?", "What is the user's default browser?",
           "Where do links open for the user?"),
          "Which browser did the user use {when}?",
          changes=("The user switched browsers to {v}.",)),
    Topic("phone", "global", "the user's phone",
          ("an iPhone 13", "a Pixel 7", "a Galaxy S23", "a Fairphone 5", "an iPhone 15", "a Pixel 8"),
          ("The user's phone is {v}.", "The user carries {v}.", "The user uses {v} as a phone.",
           "Two-factor codes reach the user on {v}."),
          ("What phone does the user have?", "Which phone does the user carry?",
           "Where do the user's two-factor codes arrive?"),
          "What phone did the user have {when}?",
          changes=("The user replaced {old} with {v}.", "The user upgraded to {v}.")),
    Topic("commute", "global", "the user's way to work",
          ("by bike", "by train", "by car", "on foot", "by bus", "by scooter"),
          ("The user commutes {v}.", "The user gets to the office {v}.", "The user travels to work {v}.",
           "Most mornings the user arrives {v}."),
          ("How does the user commute?", "How does the user get to the office?",
           "How does the user travel to work?"),
          "How did the user commute {when}?",
          generic=False, changes=("The user started commuting {v}.",)),
    Topic("drink", "global", "the user's usual drink",
          ("flat white", "espresso", "green tea", "oat latte", "black coffee", "chai"),
          ("The user drinks {v}.", "The user's usual drink is {v}.", "Order {v} for the user.",
           "The user starts the day with {v}."),
          ("What does the user usually drink?", "What should be ordered for the user to drink?",
           "How does the user start the day?"),
          "What did the user drink {when}?",
          changes=("The user gave up {old} for {v}.",)),
    Topic("diet", "global", "the user's diet",
          ("vegetarian", "vegan", "pescatarian", "gluten-free", "keto", "halal"),
          ("The user follows a {v} diet.", "The user eats {v}.",
           "For team lunches, order {v} food for the user.",
           "The user's meals are {v}."),
          ("What diet does the user follow?", "What food should be ordered for the user?",
           "What does the user eat?"),
          "What diet did the user follow {when}?",
          changes=("The user went {v}.",)),
    Topic("hobby", "global", "the user's hobby",
          ("climbing", "chess", "woodworking", "photography", "sailing", "pottery", "birdwatching"),
          ("The user's hobby is {v}.", "In free time the user does {v}.", "The user spends weekends on {v}.",
           "Outside work the user is into {v}."),
          ("What is the user's hobby?", "What does the user do in free time?",
           "What does the user spend weekends on?"),
          "What was the user's hobby {when}?",
          changes=("The user took up {v}.", "The user swapped {old} for {v}.")),
    Topic("meetings", "global", "the user's meeting tool",
          ("Zoom", "Google Meet", "Microsoft Teams", "Jitsi", "Whereby", "Slack huddles"),
          ("The user prefers meetings on {v}.", "Calls with the user happen on {v}.",
           "The user's meeting tool is {v}.", "Send the user {v} links for calls."),
          ("Which meeting tool does the user prefer?", "Where do calls with the user happen?",
           "What kind of call links should the user get?"),
          "Which meeting tool did the user prefer {when}?"),
    Topic("notes", "global", "the user's note-taking app",
          ("Obsidian", "Notion", "Logseq", "Bear", "Evernote", "Apple Notes", "Joplin"),
          ("The user takes notes in {v}.", "The user's notes live in {v}.",
           "The user's note-taking app is {v}.",
           "Meeting notes for the user go into {v}."),
          ("Where does the user take notes?", "Which note-taking app does the user use?",
           "Where do the user's meeting notes go?"),
          "Where did the user take notes {when}?",
          changes=("The user migrated the notes from {old} to {v}.",)),
)

@dataclass(frozen=True)
class Restatement:
    """The restated wording of a topic: every statement and question names the same subject.

    Each subject word (compared by stem) appears in every template, change statement, question
    and the noun, outside the {v} and {old} slots, so every version of the fact shares it with
    every other version and with every question about the fact."""

    subject: tuple[str, ...]
    noun: str  # what the scope's generic change statements and "used to" questions name
    plain: tuple[str, ...]  # restatements with {v} and no change word
    current: tuple[str, ...]
    past: str
    changes: tuple[str, ...] = ()
    generic: bool = True


def _owner_restated(module: str) -> Restatement:
    return Restatement(
        (module, "module"), f"the owner of the {module} module",
        (f"{{v}} owns the {module} module.", f"The {module} module is owned by {{v}}.",
         f"The owner of the {module} module is {{v}}."),
        (f"Who owns the {module} module?", f"Who is the owner of the {module} module?"),
        f"Who owned the {module} module {{when}}?",
        changes=(f"{{v}} took over the {module} module from {{old}}.",))


RESTATED: dict[str, Restatement] = {
    # ---- project facts (local memory) ---------------------------------------------------------
    "python": Restatement(
        ("target",), "the Python version the project targets",
        ("The project targets {v}.", "The project targets {v} for every build.",
         "{v} is what the project targets."),
        ("What Python version does the project target?", "Which Python release does the project target?"),
        "Which Python version did the project target {when}?",
        changes=("The project now targets {v}.", "Bumped the project target from {old} to {v}.",
                 "The project target moved from {old} to {v}.", "Switched the project target to {v}."),
        generic=False),
    "cache": Restatement(
        ("caching",), "the caching backend",
        ("The caching backend is {v}.", "We use {v} as the caching backend.", "{v} is our caching backend."),
        ("Which caching backend do we use?", "What do we use for caching?"),
        "Which caching backend did we use {when}?",
        changes=("Caching moved from {old} to {v}.", "Switched caching to {v}.")),
    "database": Restatement(
        ("database",), "the main database",
        ("The main database is {v}.", "We use {v} as the main database.",
         "The app keeps its data in the {v} database."),
        ("Which database does the app use?", "What is the app's main database?"),
        "Which database did the app use {when}?",
        changes=("Migrated the database from {old} to {v}.",)),
    "ci": Restatement(
        ("ci",), "the CI system",
        ("CI runs on {v}.", "The CI system is {v}.", "The CI pipelines run on {v}."),
        ("Which CI system runs our builds?", "Where does CI run?"),
        "Which CI system ran our builds {when}?",
        changes=("CI moved from {old} to {v}.",)),
    "deploy": Restatement(
        ("deploy",), "the deploy target",
        ("We deploy to {v}.", "The deploy target is {v}.", "Production deploys go to {v}."),
        ("Where do we deploy?", "What is the deploy target?"),
        "Where did we deploy {when}?",
        changes=("Moved deploys from {old} to {v}.", "We now deploy to {v}.")),
    "tests": Restatement(
        ("test",), "the test framework",
        ("Tests are written with {v}.", "The test framework is {v}.", "We run the tests with {v}."),
        ("Which test framework do we use?", "What are the tests written with?"),
        "Which test framework did the tests use {when}?",
        changes=("Moved the tests from {old} to {v}.",)),
    "linter": Restatement(
        ("linter",), "the linter",
        ("The linter is {v}.", "We use {v} as the linter.", "{v} is the project's linter."),
        ("Which linter do we use?", "What is the project's linter?"),
        "Which linter did we use {when}?"),
    "formatter": Restatement(
        ("formatter",), "the code formatter",
        ("The code formatter is {v}.", "We use {v} as the formatter.", "{v} is our formatter."),
        ("Which formatter do we use?", "What is the code formatter?"),
        "Which formatter did we use {when}?"),
    "packages": Restatement(
        ("package",), "the package manager",
        ("The package manager is {v}.", "We use {v} as the package manager.",
         "{v} is the project's package manager."),
        ("Which package manager does the project use?", "What is the project's package manager?"),
        "Which package manager did the project use {when}?"),
    "license": Restatement(
        ("license",), "the project license",
        ("The project license is {v}.", "The license is {v}.", "The code is released under the {v} license."),
        ("What license does the project use?", "Which license is the code released under?"),
        "What license did the project use {when}?",
        changes=("Changed the license from {old} to {v}.",)),
    "branch": Restatement(
        ("branch",), "the default branch",
        ("The default branch is {v}.", "Pull requests target the {v} branch.",
         "We merge into the {v} branch."),
        ("What is the default branch?", "Which branch do we merge into?"),
        "What was the default branch {when}?",
        changes=("Renamed the default branch from {old} to {v}.",)),
    "cadence": Restatement(
        ("release",), "the release cadence",
        ("We release {v}.", "The release cadence is {v}.", "We cut a release {v}."),
        ("How often do we release?", "What is the release cadence?"),
        "How often did we release {when}?",
        changes=("The release cadence is now {v}.", "The release cadence changed from {old} to {v}.",
                 "We moved the release cadence from {old} to {v}."),
        generic=False),
    "api": Restatement(
        ("api",), "the API framework",
        ("The API is built with {v}.", "The API framework is {v}.", "We build the API with {v}."),
        ("Which framework is the API built with?", "What is the API framework?"),
        "Which framework was the API built with {when}?",
        changes=("Rewrote the API from {old} to {v}.",)),
    "frontend": Restatement(
        ("frontend",), "the frontend framework",
        ("The frontend is written in {v}.", "The frontend framework is {v}.",
         "We build the frontend with {v}."),
        ("Which frontend framework do we use?", "What is the frontend written in?"),
        "Which frontend framework did we use {when}?",
        changes=("Rewrote the frontend from {old} to {v}.",)),
    "queue": Restatement(
        ("queue",), "the message queue",
        ("The message queue is {v}.", "We use {v} as the message queue.",
         "Background jobs go through the {v} queue."),
        ("Which message queue do we use?", "What queue do background jobs go through?"),
        "Which message queue did we use {when}?"),
    "containers": Restatement(
        ("container",), "the container runtime",
        ("The container runtime is {v}.", "Containers run on {v}.", "We run the containers with {v}."),
        ("Which container runtime do we use?", "What runs our containers?"),
        "Which container runtime did we use {when}?"),
    "region": Restatement(
        ("region",), "the cloud region",
        ("The cloud region is {v}.", "The servers run in the {v} region.",
         "We host everything in the {v} region."),
        ("Which cloud region do we use?", "Which region are the servers in?"),
        "Which cloud region hosted the servers {when}?",
        changes=("Moved the servers from the {old} region to {v}.",)),
    "logs": Restatement(
        ("log",), "the log format",
        ("The log format is {v}.", "Logs are written as {v}.", "Services write their logs as {v}."),
        ("What format are the logs in?", "Which log format do we use?"),
        "What format were the logs in {when}?",
        changes=("Switched the logs from {old} to {v}.",)),
    "docs": Restatement(
        ("docs",), "the docs tool",
        ("The docs are built with {v}.", "The docs tool is {v}.", "We write the docs in {v}."),
        ("Which tool builds the docs?", "What is the docs tool?"),
        "Which tool built the docs {when}?"),
    "owner_billing": _owner_restated("billing"),
    "owner_auth": _owner_restated("auth"),
    "owner_search": _owner_restated("search"),
    "orm": Restatement(
        ("orm",), "the ORM",
        ("The ORM is {v}.", "We use {v} as the ORM.", "The project's ORM is {v}."),
        ("Which ORM do we use?", "What is the project's ORM?"),
        "Which ORM did we use {when}?"),
    "types": Restatement(
        ("type",), "the type checker",
        ("The type checker is {v}.", "Types are checked with {v}.", "We check the types with {v}."),
        ("Which type checker do we use?", "What checks the types?"),
        "Which type checker did we use {when}?"),
    "monitoring": Restatement(
        ("monitor",), "the monitoring stack",
        ("The monitoring stack is {v}.", "We monitor the services with {v}.", "Monitoring runs on {v}."),
        ("What do we monitor the services with?", "Which monitoring stack do we use?"),
        "What did we monitor the services with {when}?"),
    "errors": Restatement(
        ("error",), "the error tracker",
        ("The error tracker is {v}.", "Errors are reported to {v}.", "We track errors in {v}."),
        ("Which error tracker do we use?", "Where are errors reported?"),
        "Where were errors reported {when}?"),
    "tasks": Restatement(
        ("task",), "the task runner",
        ("The task runner is {v}.", "Developer tasks run through {v}.", "We define the tasks in {v}."),
        ("Which task runner do we use?", "Where are the developer tasks defined?"),
        "Which task runner did we use {when}?"),
    "secrets": Restatement(
        ("secret",), "the secrets manager",
        ("The secrets manager is {v}.", "Secrets are kept in {v}.", "We store the secrets in {v}."),
        ("Which secrets manager do we use?", "Where are the secrets kept?"),
        "Where were the secrets kept {when}?"),
    "issues": Restatement(
        ("issue",), "the issue tracker",
        ("The issue tracker is {v}.", "We use {v} as the issue tracker.", "{v} is our issue tracker."),
        ("Which issue tracker do we use?", "What do we use as the issue tracker?"),
        "Which issue tracker did we use {when}?"),
    "search_engine": Restatement(
        ("search",), "the search engine",
        ("The search engine is {v}.", "Product search runs on {v}.", "Search queries go to {v}."),
        ("Which search engine do we use?", "What powers product search?"),
        "Which search engine powered product search {when}?"),
    # ---- user facts (global memory) -----------------------------------------------------------
    "city": Restatement(
        ("live",), "the city the user lives in",
        ("The user lives in {v}.", "The user lives and works in {v}.", "{v} is where the user lives."),
        ("Where does the user live?", "Which city does the user live in?"),
        "Where did the user live {when}?",
        changes=("The user now lives in {v}.", "The user moved to {v} and lives there.",
                 "The user lives in {v} after moving from {old}."),
        generic=False),
    "employer": Restatement(
        ("work",), "the company the user works for",
        ("The user works at {v}.", "The user works for {v}.", "{v} is where the user works."),
        ("Where does the user work?", "Which company does the user work for?"),
        "Where did the user work {when}?",
        changes=("The user now works at {v}.", "The user left {old} and works at {v}.",
                 "The user works at {v} after leaving {old}."),
        generic=False),
    "team": Restatement(
        ("team",), "the user's team",
        ("The user is on the {v} team.", "The user's team is {v}.", "The user belongs to the {v} team."),
        ("Which team is the user on?", "What team does the user belong to?"),
        "Which team was the user on {when}?",
        changes=("The user transferred to the {v} team.",
                 "The user moved from the {old} team to the {v} team.")),
    "editor": Restatement(
        ("editor",), "the user's editor",
        ("The user's editor is {v}.", "The user's preferred editor is {v}.",
         "The user uses {v} as their editor."),
        ("Which editor does the user use?", "What is the user's editor of choice?"),
        "Which editor did the user prefer {when}?",
        changes=("The user switched editors to {v}.", "The user replaced {old} with {v} as their editor.")),
    "language": Restatement(
        ("language",), "the user's favourite language",
        ("The user's favourite language is {v}.", "The user's favourite programming language is {v}.",
         "{v} is the user's favourite language."),
        ("Which programming language does the user prefer?", "What is the user's favourite language?"),
        "Which programming language did the user prefer {when}?"),
    "timezone": Restatement(
        ("timezone",), "the user's timezone",
        ("The user's timezone is {v}.", "The user is in the {v} timezone.",
         "The user's calendar timezone is {v}."),
        ("What timezone is the user in?", "Which timezone should times be given in for the user?"),
        "What timezone was the user in {when}?",
        changes=("The user moved to the {v} timezone.",)),
    "shell": Restatement(
        ("shell",), "the user's shell",
        ("The user's shell is {v}.", "The user's login shell is {v}.", "The user uses {v} as their shell."),
        ("Which shell does the user use?", "What is the user's login shell?"),
        "Which shell did the user use {when}?",
        changes=("The user switched the login shell to {v}.",
                 "The user replaced {old} with {v} as their shell.")),
    "laptop": Restatement(
        ("laptop",), "the operating system on the user's laptop",
        ("The user's laptop runs {v}.", "The user's laptop has {v} installed.",
         "{v} is the operating system on the user's laptop."),
        ("Which operating system is on the user's laptop?", "What OS does the user's laptop run?"),
        "What OS did the user's laptop run {when}?",
        changes=("The user reinstalled the laptop with {v}.",
                 "The user moved the laptop from {old} to {v}.")),
    "hours": Restatement(
        ("hour",), "the user's working hours",
        ("The user's working hours are {v}.", "The user's hours are {v}.",
         "The user keeps office hours of {v}."),
        ("What are the user's working hours?", "What hours does the user work?"),
        "What were the user's working hours {when}?",
        changes=("The user's working hours are now {v}.",
                 "The user's working hours changed from {old} to {v}.",
                 "The user moved their hours from {old} to {v}."),
        generic=False),
    "manager": Restatement(
        ("manager",), "the user's manager",
        ("The user's manager is {v}.", "The user's line manager is {v}.", "{v} is the user's manager."),
        ("Who is the user's manager?", "Who is the user's line manager?"),
        "Who was the user's manager {when}?",
        changes=("The user got a new manager, {v}.",)),
    "role": Restatement(
        ("role",), "the user's role",
        ("The user's role is {v}.", "The user is in the {v} role.", "The user's job role is {v}."),
        ("What is the user's role?", "What role does the user have?"),
        "What was the user's role {when}?",
        changes=("The user was promoted to the {v} role.",)),
    "keyboard": Restatement(
        ("keyboard",), "the user's keyboard layout",
        ("The user's keyboard layout is {v}.", "The user types on a keyboard set to {v}.",
         "The user's keyboard is set to {v}."),
        ("Which keyboard layout does the user type on?", "What is the user's keyboard layout?"),
        "Which keyboard layout did the user type on {when}?",
        changes=("The user switched the keyboard to {v}.",)),
    "browser": Restatement(
        ("browser",), "the user's browser",
        ("The user's browser is {v}.", "The user's default browser is {v}.",
         "The user uses {v} as their browser."),
        ("Which browser does the user use?", "What is the user's default browser?"),
        "Which browser did the user use {when}?",
        changes=("The user switched browsers to {v}.",)),
    "phone": Restatement(
        ("phone",), "the user's phone",
        ("The user's phone is {v}.", "The user uses {v} as their phone.", "The user has {v} as their phone."),
        ("What phone does the user have?", "Which phone does the user carry?"),
        "What phone did the user have {when}?",
        changes=("The user replaced {old} with {v} as their phone.",
                 "The user upgraded their phone to {v}.")),
    "commute": Restatement(
        ("commute",), "the user's commute",
        ("The user's commute is {v}.", "The user makes the commute {v}.",
         "The user does the daily commute {v}."),
        ("How does the user commute?", "How does the user commute to work?"),
        "How did the user commute {when}?",
        changes=("The user's commute is now {v}.", "The user now makes the commute {v}.",
                 "The user switched to commuting {v}."),
        generic=False),
    "drink": Restatement(
        ("drink",), "the user's usual drink",
        ("The user's usual drink is {v}.", "The user drinks {v}.", "The user's drink of choice is {v}."),
        ("What does the user usually drink?", "What is the user's usual drink?"),
        "What did the user drink {when}?",
        changes=("The user gave up {old} and drinks {v}.",)),
    "diet": Restatement(
        ("diet",), "the user's diet",
        ("The user follows a {v} diet.", "The user's diet is {v}.", "The user keeps a {v} diet."),
        ("What diet does the user follow?", "What is the user's diet?"),
        "What diet did the user follow {when}?",
        changes=("The user switched to a {v} diet.", "The user moved from a {old} diet to a {v} diet.")),
    "hobby": Restatement(
        ("hobby",), "the user's hobby",
        ("The user's hobby is {v}.", "The user's main hobby is {v}.", "The user's favourite hobby is {v}."),
        ("What is the user's hobby?", "What hobby does the user have?"),
        "What was the user's hobby {when}?",
        changes=("The user took up {v} as a new hobby.", "The user swapped {old} for {v} as a hobby.")),
    "meetings": Restatement(
        ("meeting",), "the user's meeting tool",
        ("The user's meeting tool is {v}.", "The user prefers {v} for every meeting.",
         "The user holds each meeting on {v}."),
        ("Which meeting tool does the user prefer?", "What is the user's meeting tool?"),
        "Which meeting tool did the user prefer {when}?",
        changes=("The user switched the meeting tool to {v}.",)),
    "notes": Restatement(
        ("note",), "the user's note-taking app",
        ("The user takes notes in {v}.", "The user's notes live in {v}.",
         "The user's note-taking app is {v}."),
        ("Where does the user take notes?", "Which note-taking app does the user use?"),
        "Where did the user take notes {when}?",
        changes=("The user migrated the notes from {old} to {v}.",)),
}


# Unrelated facts mixed into both memories. Several share words with the topics ("project",
# "user", "uses", "database", "cache", "billing", "monthly", "Go") so a topic word alone does not
# find the answer; none states a value of a topic.
DISTRACTOR_POOL: tuple[tuple[str, str], ...] = tuple(("local", text) for text in (
    "The project README has a section on contributing.",
    "The project uses semantic versioning for its tags.",
    "The project logo is a blue hexagon.",
    "Unit tests must not touch the network.",
    "The staging database is reset every Sunday night.",
    "The API returns dates in ISO 8601.",
    "Feature flags are stored in a YAML file in the repository.",
    "User-facing error messages are translated into German and French.",
    "Every migration needs a rollback script.",
    "The changelog follows the Keep a Changelog format.",
    "The project uses conventional commit messages.",
    "Pull requests need a linked issue.",
    "The nightly job rebuilds the search index.",
    "The cache keys are prefixed with the tenant id.",
    "The CI badge in the README points at the wrong workflow.",
    "The payments service has a 30 second timeout.",
    "Deploys are frozen during the last week of December.",
    "The frontend bundle must stay under 300 KB.",
    "License headers are checked by a pre-commit hook.",
    "Code coverage must stay above 85 percent.",
    "The docs have a glossary page for domain terms.",
    "The message schema uses Avro.",
    "Container images are scanned for vulnerabilities before release.",
    "The project stores every timestamp in UTC.",
    "The load balancer terminates TLS.",
    "The billing module has no integration tests.",
    "The auth module rotates its signing keys monthly.",
    "The search module caches query plans.",
    "Type hints are required in new code.",
    "Log lines must not contain personal data.",
    "The team demo happens on Thursdays.",
    "The on-call rotation changes every Monday.",
    "Branch names start with the ticket number.",
    "The API rate limit is 100 requests per minute per key.",
    "The project uses a monorepo with three services.",
    "Database backups are kept for 35 days.",
)) + tuple(("global", text) for text in (
    "The user has a dog named Biscuit.",
    "The user likes short answers with code first.",
    "The user's sister lives in Porto.",
    "The user is allergic to peanuts.",
    "The user prefers metric units.",
    "The user is learning Japanese.",
    "The user's birthday is in October.",
    "The user uses two monitors.",
    "The user dislikes long meetings.",
    "The user's partner works at a hospital.",
    "The user plays bass in a band.",
    "The user reads science fiction.",
    "The user takes the last Friday of each month off.",
    "The user studied in Leeds.",
    "The user wants commit messages in the imperative mood.",
    "The user prefers British spelling.",
    "The user's cat is called Miso.",
    "The user runs a half marathon every spring.",
    "The user uses a standing desk.",
    "The user's team lunch is on Wednesdays.",
    "The user's keyboard has brown switches.",
    "The user hosts a podcast about compilers.",
    "The user asked to be reminded about expense reports.",
    "The user speaks Portuguese and English.",
    "The user's manager likes weekly status notes.",
    "The user prefers dark themes in every app.",
    "The user keeps dotfiles in a public repository.",
    "The user volunteers at a coding club on Saturdays.",
    "The user's favourite board game is Go.",
    "The user uses a password manager for every account.",
))


# ---- the scenario ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Version:
    """One statement of a changing fact: its text, the month it took effect (year, month), and
    whether the text itself carries that date."""

    content: str
    value: str
    year: int
    month: int
    dated: bool
    changed: bool  # written with a change word


@dataclass(frozen=True)
class History:
    topic: str
    scope: str
    versions: tuple[Version, ...]  # oldest first


@dataclass(frozen=True)
class Question:
    query: str
    category: str  # "current" or "past"
    expected: str  # the exact content of one version
    scope: str  # the scope of the expected statement
    topic: str
    kind: str  # "current", or one of PAST_KINDS


@dataclass
class Scenario:
    seed: int
    statements: list[tuple[str, str]]  # (scope, content), in remember order
    questions: list[Question]
    histories: list[History] = field(default_factory=list)
    style: str = STYLES[0]

    def versions(self, topic: str) -> tuple[str, ...]:
        return next(tuple(v.content for v in h.versions) for h in self.histories if h.topic == topic)


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


# First words of statements that read well lowered after a date prefix: ordinary capitalised words,
# not names, acronyms or values ("CI", "Redis"), and not subjectless notes ("Switched the cache to
# ...") that read wrongly after "Since March 2024".
OPENERS = frozenset({"The", "We", "Our", "Every", "Code", "Containers", "Logs", "Tests", "Documentation",
                     "Dependencies", "Infrastructure", "Production", "Releases", "Responses", "Services",
                     "Background", "Events", "Workers", "Persistent", "Questions", "Calls", "Home",
                     "Terminal", "Times", "Local", "Metrics", "Exceptions", "Crashes", "Secrets",
                     "Credentials", "Bugs", "Product", "Types", "Queries", "Database", "Developer"})
# The restated templates' own openers (kept apart so the paraphrased scenarios stay as they were).
RESTATED_OPENERS = OPENERS | {"Caching", "Errors", "Monitoring", "Search"}


def _lowercasable(sentence: str, openers: frozenset[str] = OPENERS) -> bool:
    """Whether a sentence can follow a date prefix with its first letter lowered (see OPENERS)."""
    return sentence.split(" ", 1)[0] in openers


def _dated(sentence: str, year: int, month: int, rng: random.Random,
           openers: frozenset[str] = OPENERS) -> str:
    """The sentence with its own date, written one of the ways agents date a note."""
    name, iso = f"{MONTHS[month - 1]} {year}", f"{year}-{month:02d}"
    body = sentence.rstrip(".")
    forms = [f"{iso}: {sentence}", f"{body} (since {name}).", f"{body}, as of {name}."]
    if _lowercasable(sentence, openers):
        lowered = sentence[0].lower() + sentence[1:]
        forms += [f"Since {name} {lowered}", f"As of {iso}, {lowered}", f"Since {name}, {lowered}"]
    return rng.choice(forms)


def _values(topic: Topic, count: int, rng: random.Random) -> list[str]:
    values = rng.sample(topic.values, count)
    # A language version goes forward; other facts may return to an earlier value's neighbours.
    return sorted(values, key=topic.values.index) if topic.ordered else values


def _timeline(count: int, rng: random.Random) -> list[tuple[int, int]]:
    """Months at which the versions took effect, strictly increasing."""
    start = rng.randint(*FIRST_YEARS) * 12 + rng.randrange(12)
    months = [start]
    for _ in range(count - 1):
        months.append(months[-1] + rng.randint(*MONTHS_BETWEEN))
    return [(m // 12, m % 12 + 1) for m in months]


def worded(topic: Topic, style: str) -> Topic:
    """The topic as the style words it: paraphrased is the topic as written in TOPICS; restated
    takes its statements, questions and noun from RESTATED."""
    if style == "paraphrased":
        return topic
    if style != "restated":
        raise ValueError(f"style must be one of {', '.join(STYLES)}")
    r = RESTATED[topic.key]
    return replace(topic, noun=r.noun, plain=r.plain, current=r.current, past=r.past, changes=r.changes,
                   generic=r.generic)


def _history(topic: Topic, rng: random.Random, seen: set[str], style: str = "paraphrased") -> History:
    count = rng.randint(*VERSIONS)
    values = _values(topic, count, rng)
    generic = (LOCAL_CHANGES if topic.scope == "local" else GLOBAL_CHANGES) if topic.generic else ()
    changes = topic.changes + generic
    restated = style == "restated"
    openers = RESTATED_OPENERS if restated else OPENERS
    # Paraphrased: plain templates in a shuffled cycle, so consecutive versions of a fact are
    # phrased differently. Restated: each version picks from the topic's few templates afresh, so
    # a fact is often restated in the same sentence with a new value, as agents do.
    plain = rng.sample(topic.plain, len(topic.plain))
    versions: list[Version] = []
    for index, ((year, month), value) in enumerate(zip(_timeline(count, rng), values, strict=True)):
        changed = index > 0 and rng.random() < CHANGE_SHARE
        dated = rng.random() < DATED_SHARE
        if changed:
            templates = rng.sample(changes, len(changes))
        elif restated:
            templates = rng.sample(plain, len(plain))
        else:
            templates = plain[index:] + plain[:index]
        content = ""
        for template in templates:
            # Kept as written: a statement may open with a value spelled in lower case ("uv").
            sentence = template.format(v=value, old=values[index - 1], noun=topic.noun,
                                       Noun=_capitalised(topic.noun))
            content = _dated(sentence, year, month, rng, openers) if dated else sentence
            if content not in seen:
                break
        if content in seen:  # every phrasing taken: cannot happen with distinct values per topic
            raise RuntimeError(f"no unique statement left for {topic.key}")
        seen.add(content)
        versions.append(Version(content, value, year, month, dated, changed))
    return History(topic.key, topic.scope, tuple(versions))


def _stems(text: str) -> set[str]:
    """The content words of a text, crudely stemmed ("eats" -> "eat", "tracked" -> "track")."""
    stems = set()
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        if word not in OVERLAP_STOP:
            stems.add(word)
    return stems


def overlaps(question: str, statement: str) -> bool:
    """Whether a question shares a content word with a statement (the same stem, or the same first
    five letters: "tracked" and "tracker")."""
    return any(a == b or (len(a) >= 5 and a[:5] == b[:5])
               for a in _stems(question) for b in _stems(statement))


def _current_question(topic: Topic, history: History, rng: random.Random,
                      restated: bool = False) -> Question:
    """A question about the present value. Restated questions all carry the topic's subject words,
    as every version does, so any of them will do. Paraphrased ones prefer a question that shares
    a content word with the newest version: the suite measures which version comes first, so
    where the topic has such a question, a question no version answers lexically would measure
    vocabulary instead. Where none shares a word ("Where does the user live?" after "The user
    moved to Warsaw."), the gap stays, as it does for agents."""
    newest = history.versions[-1]
    shared = [] if restated else [q for q in topic.current
                                  if overlaps(q, newest.content.replace(newest.value, ""))]
    query = rng.choice(shared or list(topic.current))
    return Question(query, "current", newest.content, topic.scope, topic.key, "current")


def _year_targets(history: History) -> list[tuple[int, int]]:
    """(version index, year) pairs for "in <year>" questions: the version is the latest one that
    took effect in or before the year, it is not the newest (current questions cover that), and
    its text carries its own date so the memory can know."""
    targets = []
    versions = history.versions
    for index, version in enumerate(versions[:-1]):
        if version.dated:
            targets += [(index, year) for year in range(version.year, versions[index + 1].year)]
    return targets


def _past_question(topic: Topic, history: History, kind: str, rng: random.Random) -> Question:
    versions = history.versions
    if kind == "first":
        index, query = 0, topic.past.format(when=rng.choice(FIRST_WHEN))
    elif kind == "before":
        index = len(versions) - 2
        when = rng.choice((*BEFORE_WHEN, "used to"))
        query = (USED_TO.format(noun=topic.noun) if when == "used to"
                 else topic.past.format(when=when.format(newest=versions[-1].value)))
    else:
        index, year = rng.choice(_year_targets(history))
        query = topic.past.format(when=f"in {year}")
    return Question(query, "past", versions[index].content, topic.scope, topic.key, kind)


def _questions(topic: Topic, history: History, rng: random.Random, style: str) -> list[Question]:
    kinds = ["first", "before"] + (["year"] if _year_targets(history) else [])
    if len(history.versions) < 3:
        kinds.remove("first")  # with two versions "first" and "before" ask for the same one
    count = rng.choice((1, 2)) if len(history.versions) >= 3 else 1
    past = [_past_question(topic, history, kind, rng) for kind in rng.sample(kinds, count)]
    return [_current_question(topic, history, rng, style == "restated"), *past]


def _chosen_topics(count: int, rng: random.Random) -> list[Topic]:
    """count topics, split between the scopes in the pool's proportion, in a seeded order."""
    if not 1 <= count <= len(TOPICS):
        raise ValueError(f"topics must be from 1 to {len(TOPICS)}")
    local = [t for t in TOPICS if t.scope == "local"]
    global_ = [t for t in TOPICS if t.scope == "global"]
    n_local = min(len(local), max(count - len(global_), round(count * len(local) / len(TOPICS))))
    chosen = rng.sample(local, n_local) + rng.sample(global_, count - n_local)
    rng.shuffle(chosen)
    return chosen


def _interleave(histories: Sequence[History], distractors: Sequence[tuple[str, str]],
                rng: random.Random) -> list[tuple[str, str]]:
    """A uniformly random merge: each topic's versions keep their order, topics and distractors
    alternate at random, as facts come up while an agent works."""
    slots: list[int] = [i for i, h in enumerate(histories) for _ in h.versions] + [-1] * len(distractors)
    rng.shuffle(slots)
    next_version = [0] * len(histories)
    extra = iter(distractors)
    order: list[tuple[str, str]] = []
    for slot in slots:
        if slot < 0:
            order.append(next(extra))
            continue
        history = histories[slot]
        order.append((history.scope, history.versions[next_version[slot]].content))
        next_version[slot] += 1
    return order


def generate(seed: int, topics: int = 40, style: str = STYLES[0]) -> Scenario:
    """The scenario of a seed in a style (see the module docstring): statements in remember order
    and the questions about them. Both styles choose the same topics for a seed."""
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}")
    rng = random.Random(seed)
    chosen = [worded(topic, style) for topic in _chosen_topics(topics, rng)]
    seen = {content for _, content in DISTRACTOR_POOL}
    histories = [_history(topic, rng, seen, style) for topic in chosen]
    distractors = rng.sample(DISTRACTOR_POOL, rng.randint(*DISTRACTORS))
    questions = [q for topic, history in zip(chosen, histories, strict=True)
                 for q in _questions(topic, history, rng, style)]
    return Scenario(seed, _interleave(histories, distractors, rng), questions, histories, style)


# ---- the evaluation -------------------------------------------------------------------------

@dataclass(frozen=True)
class Scored:
    """One question's outcome: the expected statement's rank (None: not returned) and where the
    first result sits among the versions of the same fact (None: not a version of it)."""

    category: str
    kind: str
    rank: int | None
    first_version: int | None
    expected_version: int


def remember_all(remember: Remember, statements: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Remember every statement in order; content -> statement id. Contents must be unique: a
    memory that deduplicates equal statements would otherwise make two of them one."""
    ids: dict[str, str] = {}
    for scope, content in statements:
        if content in ids:
            raise ValueError(f"statement remembered twice: {content!r}")
        ids[content] = remember(content, scope)
    return ids


def score(question: Question, ranked: Sequence[str], ids: Mapping[str, str],
          versions: Sequence[str]) -> Scored:
    version_ids = [ids[content] for content in versions]
    expected = version_ids.index(ids[question.expected])
    rank = next((i + 1 for i, sid in enumerate(ranked) if sid == version_ids[expected]), None)
    first = version_ids.index(ranked[0]) if ranked and ranked[0] in version_ids else None
    return Scored(question.category, question.kind, rank, first, expected)


def summarise(rows: Sequence[Scored]) -> dict[str, float | int]:
    """count, first-rank accuracy, MRR, R@5, and the shares whose first result is an older
    (stale) or a newer version of the same fact, or no version of it."""
    n = len(rows)
    if n == 0:
        return {"questions": 0}
    return {
        "questions": n,
        "first": sum(r.rank == 1 for r in rows) / n,
        "MRR": sum(1 / r.rank for r in rows if r.rank) / n,
        "R@5": sum(r.rank is not None and r.rank <= 5 for r in rows) / n,
        "stale_first": sum(r.first_version is not None and r.first_version < r.expected_version
                           for r in rows) / n,
        "newer_first": sum(r.first_version is not None and r.first_version > r.expected_version
                           for r in rows) / n,
        # Neither version first: a vocabulary miss (or nothing found), not a choice between versions.
        "off_topic_first": sum(r.first_version is None for r in rows) / n,
    }


def groups(rows: Sequence[Scored]) -> dict[str, list[Scored]]:
    """The rows of each reported group: the categories, then past questions by kind."""
    out: dict[str, list[Scored]] = {c: [r for r in rows if r.category == c] for c in CATEGORIES}
    for kind in PAST_KINDS:
        out[f"past/{kind}"] = [r for r in rows if r.category == "past" and r.kind == kind]
    out["all"] = list(rows)
    return out


def evaluate(remember: Remember, recall: Recall, scenario: Scenario, limit: int = 10) -> dict[str, Any]:
    """Remember the scenario's statements in order, ask every question over both memories, and
    report per group (see `summarise`)."""
    ids = remember_all(remember, scenario.statements)
    rows = [score(q, list(recall(q.query, limit)), ids, scenario.versions(q.topic))
            for q in scenario.questions]
    return {"seed": scenario.seed, "style": scenario.style, "statements": len(scenario.statements),
            "topics": len(scenario.histories),
            "groups": {name: summarise(members) for name, members in groups(rows).items()}}


@contextmanager
def scoped_memory(directory: Path | None = None) -> Iterator[tuple[Remember, Recall]]:
    """remember and recall over a fresh ScopedMemory: the project's memory and the account's, both
    under `directory` (a temporary directory, removed afterwards, when none is given)."""
    with ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aml-agent-memory-")))
        memory = ScopedMemory.at(directory / "project", directory / "account")
        stack.callback(memory.close)

        def remember(content: str, scope: str) -> str:
            return memory.remember(content, scope)["statement"]["id"]

        def recall(query: str, limit: int) -> list[str]:
            return [item["id"] for item in memory.recall(query, limit)["results"]]

        yield remember, recall


def run(seed: int, topics: int = 40, limit: int = 10, directory: Path | None = None,
        style: str = STYLES[0]) -> dict[str, Any]:
    """One seed in one style over the project's ScopedMemory."""
    scenario = generate(seed, topics, style)
    with scoped_memory(directory) as (remember, recall):
        return evaluate(remember, recall, scenario, limit)


# ---- the command ----------------------------------------------------------------------------

def mean_groups(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Each group's metrics averaged over the seeds that have questions in it; counts summed."""
    out: dict[str, dict[str, float]] = {}
    for name in runs[0]["groups"] if runs else ():
        present = [r["groups"][name] for r in runs if r["groups"][name]["questions"]]
        if not present:
            out[name] = {"questions": 0}
            continue
        keys = [k for k in present[0] if k != "questions"]
        out[name] = {"questions": sum(p["questions"] for p in present),
                     **{k: statistics.fmean(p[k] for p in present) for k in keys}}
    return out


COLUMNS = (("first", "first"), ("MRR", "MRR"), ("R@5", "R@5"), ("stale_first", "stale first"),
           ("newer_first", "newer first"), ("off_topic_first", "off-topic first"))


def markdown(summary: Mapping[str, Mapping[str, float]]) -> str:
    rows = [[name, str(int(row["questions"])), *(fmt(row.get(key)) for key, _ in COLUMNS)]
            for name, row in summary.items()]
    return table(["group", "questions", *(label for _, label in COLUMNS)], rows)


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("seeds must be integers separated by commas") from None
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed")
    return seeds


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}")
        return value
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aml_retriever.evaluation.agent_memory",
        description="Changing facts in an agent's memory: is the right version recalled first?")
    parser.add_argument("--seeds", type=_seeds, default=[1, 2, 3], help="comma-separated (default 1,2,3)")
    parser.add_argument("--topics", type=_bounded(1, len(TOPICS)), default=40,
                        help=f"changing facts per seed, 1 to {len(TOPICS)} (default 40)")
    parser.add_argument("--limit", type=_bounded(1, 100), default=10, help="results per recall (default 10)")
    parser.add_argument("--style", choices=(*STYLES, "both"), default=STYLES[0],
                        help="restated: versions share the subject words (what the targets are measured "
                             "on); paraphrased: every version worded differently (the lexical floor); "
                             "both: one table each (default restated)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every seed's numbers here")
    args = parser.parse_args(argv)
    styles = STYLES if args.style == "both" else (args.style,)
    results: dict[str, dict[str, Any]] = {}
    for number, style in enumerate(styles):
        runs = [run(seed, args.topics, args.limit, style=style) for seed in args.seeds]
        summary = mean_groups(runs)
        results[style] = {"runs": runs, "mean": summary}
        statements = statistics.fmean(r["statements"] for r in runs)
        print(("\n" if number else "")
              + f"Agent memory, {style}: seeds {','.join(map(str, args.seeds))}, {args.topics} topics, "
              f"{statements:.0f} statements per seed, recall limit {args.limit}; means over seeds, "
              "questions summed.\n")
        print(markdown(summary))
    if args.json is not None:
        payload = {"suite": "agent_memory", "seeds": args.seeds, "topics": args.topics, "limit": args.limit,
                   "styles": results}
        try:
            args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            parser.exit(2, f"{parser.prog}: error: cannot write {args.json}: {exc.strerror}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
