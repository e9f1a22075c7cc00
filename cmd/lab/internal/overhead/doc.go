// Package overhead measures what the gateway costs a request, the way a
// user would: the same requests sent straight to an upstream, through a bare
// reverse proxy, and through the gateway, and the difference.
//
// Three targets, or more, run at once on loopback ports:
//
//   - stub: a zero-delay upstream in this process, which answers every chat
//     completion and embeddings call at once in OpenAI's JSON with a usage
//     block, a chat in 16 tokens at most whatever cap it names (the gateway
//     names its model's default on a call that names none), or a chat that
//     asks for a stream as server-sent events of 16 tokens each, as many as
//     its cap, with a last usage chunk, and with the
//     headers OpenAI sends: a request id, its processing time and its rate
//     limits, whose remaining counts change from one answer to the next
//     (the proxy passes them on; the gateway reads them, and answers with
//     its own);
//   - proxy: a bare [httputil.ReverseProxy] in front of the stub, in a process
//     of its own ([ProxyCommand] of this program), with a pool of the buffers
//     it copies answers through, as a proxy built for load has, keeping as
//     many idle connections to the stub (256) as the gateway does to a
//     provider without maxInFlight, more than the workers use;
//   - gateway: the gateway binary in front of the stub, with a limit at each
//     of the five levels (user, tenant, endpoint, global, provider), each set
//     to queue (onLimit Queue) and to ten times what the run needs, so every
//     limit is checked and charged on every request but none refuses or
//     holds one. The model names its encoding, as a user's would, so the
//     gateway counts prompt tokens with it. It traces nothing, whatever
//     OTEL_* variables the lab runs with.
//
// With [Options.Stores] naming redis, one more gateway is a target after
// the gateway: the same, keeping its limits in a redis-server that the run
// starts on loopback.
//
// Each step sends one shape of call ([Options.Shapes]): a short chat that
// names its max_tokens (chat, the default) or names none (chat-uncapped),
// a chat streamed in 200 chunks (stream), an embeddings call of 64 inputs
// (embeddings), and a chat whose prompt is a transcript of 40,000 tokens
// (long-prompt). The bare proxy passes each body through as it comes, the
// stream's chunks as they arrive.
//
// With [Options.Tracing] (-tracing 0.01,1), one more gateway for each share
// is a target after those three: the same gateway, tracing that share of its
// calls (OTEL_TRACES_SAMPLER=traceidratio) and sending their spans over
// OTLP/HTTP to a receiver in this process, which counts them and keeps
// none. A traced gateway sends its batches every 100 ms rather than the
// SDK's 5 s, so that a step's CPU time holds the sending of its own spans.
// The report adds, for each traced gateway, the spans it sent and its CPU a
// request and p50 beside the untraced gateway's; the checks are made on the
// untraced gateway.
//
// The load is open-loop, and with [Options.Connections] closed-loop too.
// Open-loop, at rate r the i-th request of a step is due at
// start + i/r, whatever became of the ones before it, and its latency runs
// from when it was due to when its answer had been read. A request that left
// late, because the load generator or the target was slow, counts its wait:
// coordinated omission is corrected. The generator holds at most
// [Options.Workers] requests in flight, and connections, per target; a
// request that finds them all busy when it is due is counted as late, and
// the report says the generator fell behind. Closed-loop, each of
// Connections connections sends its next call as soon as it has read the
// answer to the last, for a step's length: the target serves as many calls
// as it can. The report gives its calls a second and its calls a second of
// its own CPU time, and takes the second, against the bare proxy's in the
// same round, as the target's capacity on one core: on a machine of two
// cores the load and the stub, on the other, cannot keep a bare proxy's
// core busy, so its calls a second alone would flatter the gateway. The
// share of its core each target kept busy is beside them.
//
// On a machine of two CPUs or more the run is pinned ([Options.Pin]): this
// process, the load and the stub, keeps to CPU 0, and the proxy and the
// gateways, started from it and so with GOMAXPROCS 1, move to CPU 1, each
// process on its core, as a gateway pod limited to one CPU runs. Unpinned,
// the targets' CPU times take in how the kernel and the Go scheduler shuffle
// three processes' threads over the cores, which changes from run to run.
//
// A run is [Options.Rounds] rounds; each round runs, for each shape, every
// rate and then the closed loop against every target in turn, stub, proxy,
// gateway (then the gateway in Redis and the traced gateways), for
// [Options.Step] each, so that a change in the machine's load touches every
// target alike. A warm-up step per shape and target, at the lowest rate,
// comes first and is not counted.
//
// For each shape, load and target the report gives p50 and p99 of all rounds'
// latencies; for the proxy and the gateway, what each adds to the stub alone
// (its percentile less the stub's), and CPU seconds per request: the growth
// of its process's utime+stime in /proc/<pid>/stat over each step, summed,
// over the requests answered. The stub and the load generator share this
// process, which is not counted.
//
// On closed loop, each process's resident memory (VmRSS in
// /proc/<pid>/status, read alike for the proxy and the gateways) is read
// just before the step and every 100 ms during it. The memory a call in
// flight takes beyond its body is the most sampled less the memory before,
// over the connections, less the call's request body: a gateway that holds
// each body whole shows the rest of what a call costs it, a proxy that
// streams the body comes out below zero. Of the rounds, the most is
// reported. A Go process keeps the memory it grew by, and serves later
// calls from it, so the figure counts only what the step needed beyond
// what earlier steps left: it is a bound below, faithful for a shape run
// alone (-shapes) at rates that hold fewer calls in flight than the closed
// loop, as the saturation runs' do. A step whose target did not grow at
// all, having held every call in memory kept from before, measures
// nothing, and the table says so.
//
// With [Options.Soak] (-soak 10m), the gateway that keeps its limits in
// memory takes the run's first shape of call for that long after the
// rounds, open-loop at 80% of the calls a second it served on the closed
// loop (at the highest rate without one), in windows of 5 s at most and
// six at least. After each window its resident memory and, from its
// /metrics, its heap in use (go_memstats_heap_inuse_bytes) and goroutines
// are sampled; the report lists the samples. At 80% the load generator
// may fall behind (late in the samples): the calls still reach the gateway
// as fast as they can, which is what a soak of its memory needs.
//
// The checks are made for each shape at the highest rate (2,000 requests a
// second by default) against the target for two cores: the gateway's added
// p50 at most 1.4 times the bare proxy's, its CPU per request at most 1.2
// times the bare proxy's, and its added p99 at most 1.5 times the bare
// proxy's or 2 ms, whichever is more: the bare proxy's added p99 is often a
// few microseconds, or below zero as the stub's own p99 moves from step to
// step, and 1.5 times that would fail the gateway on any scheduler's
// hiccup. On closed loop: its capacity on one core at least 0.8 of the
// bare proxy's, 0.6 for the gateway in Redis, the median of the rounds'
// shares; and its memory a call in flight, each gateway's, at most 64 KiB
// beyond its body, the bare proxy's beside it. Over the soak: a flat heap,
// its mean heap in use over the last third of the samples at most 1.1
// times its mean over the second third (the first is the warm-up). The
// p99 a client sees through the gateway, the stub's own time and the load
// generator's included, is in the table beside it.
//
// The core, percentiles, the parsing of /proc and of the metrics, and the
// checks, is pure; see results, checks, flatHeap, parseStat, parseRSS and
// parseGoMemory.
package overhead
