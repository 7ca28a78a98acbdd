"""Evaluation harness: synthetic suites, public benchmarks, metrics, runners, ablations, scans.

Modules, in the order data flows through them:

  vocab, synthetic, suites   deterministic synthetic conversations with planted facts
  public_data                LoCoMo / LongMemEval files -> replay files
  dataset                    the one shape every run reads (conversations, questions, evidence)
  backends                   the in-process service, or any server over HTTP
  runner                     Adds, Searches, per-question records, per-group summaries
  metrics                    pure metric functions
  reader                     what a reader of the results' text alone sees: dates, speakers
  experiment                 in-process runs of several configurations over several seeds
  ablation, scan             signal ablations and parameter grids
  report, cli                Markdown/JSON output and the commands behind scripts/
  rehearsal                  a leaderboard run rehearsed against a running server, as the
                             platform's client drives it (`python3 -m aml_retriever rehearse`)
  rehearsal_report           what a rehearsal counted: report.json, answers.jsonl, prompts/

Nothing here is imported by the service; the package runs on the standard library alone.
"""
