// Package labrun is what the lab's measured runs, the load ramp (package ramp) and the overhead
// measurement (package overhead), share: the pacing of their load, the percentiles of what they
// measure, and the table and JSON file they report in.
//
// The gateway binary they start is package gatewayproc's, the chat completion they send package
// openai's, and the gateway their tests run package labtest's.
package labrun
