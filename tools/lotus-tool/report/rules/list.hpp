// lotus — lotus-tool report: the findings' rules, one row each, in their order (no include guard)
// SPDX-License-Identifier: MIT
// LOTUS_RULE(id, place, pooled): the rule `rules::id`, in report/rules/<id>.cpp (the build reads
// this list for its sources), answers the question whose finding kind is `id`.
//   place: story   first of all (a capture's story: why the capture exists)
//          verdict  leads the acts (the straggler, the input-bound verdict)
//          share    among the acts by the share of the run's time it explains (numbers.explains)
//   pooled: over_ranks when its figures pool every rank's records (with several ranks, it says so
//           and its subject.ranks is "all"), else own.
// The rows' order is the findings' order within a level (docs/FINDINGS.md, "The order", lists
// them in this order; a test checks it). Adding a finding: its file and its row.
LOTUS_RULE(capture, story, own)
LOTUS_RULE(straggler, verdict, own)
LOTUS_RULE(input_bound, verdict, own)
LOTUS_RULE(startup, share, own)
LOTUS_RULE(loader_rebuilds, share, over_ranks)
LOTUS_RULE(top_op, share, over_ranks)
LOTUS_RULE(drift, share, own)
LOTUS_RULE(imbalance, share, own)
LOTUS_RULE(out_of_order, share, over_ranks)
LOTUS_RULE(batch_delay, share, over_ranks)
LOTUS_RULE(causes, share, over_ranks)
LOTUS_RULE(worker_memory, share, own)
