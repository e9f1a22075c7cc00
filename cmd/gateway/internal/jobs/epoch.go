package jobs

import (
	"crypto/rand"
	"strings"
)

// A store's epoch names the life of its jobs. A store can lose them all: a Redis restarted
// without persistence, flushed, or a replica promoted without its data, comes back empty; a
// gateway on the memory store restarts empty. Each store has a random epoch for as long as it
// keeps its jobs, and every job id carries the epoch its job was added under. A job a store does
// not hold, whose id carries another epoch than the store's, was lost with the store (ErrLost);
// one whose id carries the store's own epoch, or none, expired or was never added
// (ErrNotFound).
//
// In memory the epoch is the process's. In Redis it is a key without expiry, created by the
// first Add that finds none (SET NX, so that every gateway agrees on one) and checked by the
// script that adds each job: a job is never kept under an epoch that is not its store's. A Redis
// restored from a snapshot that holds the key brings its epoch back; the gateway that finds the
// store behind its durable record gives it a new one (NewEpoch), so that the jobs added after the
// snapshot read as ErrLost too.

// epochLen is an epoch's length: 40 random bits in base32.
const epochLen = 8

// textLen is the length of rand.Text: 128 random bits in base32.
const textLen = 26

// base32 is the alphabet of rand.Text.
const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// newEpoch returns a new random epoch.
func newEpoch() string { return rand.Text()[:epochLen] }

// newID returns a new job id under epoch: "job_", the epoch, then 128 random bits. It is
// opaque to clients and URL-safe.
func newID(epoch string) string { return "job_" + epoch + rand.Text() }

// epochOf returns the epoch a job id carries, or false for one newID did not make: a malformed
// id, or one made before ids carried an epoch.
func epochOf(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "job_")
	if !ok || len(rest) != epochLen+textLen || strings.Trim(rest, base32) != "" {
		return "", false
	}
	return rest[:epochLen], true
}

// missing says why a store whose epoch is current does not hold the job id names: ErrLost when
// the id carries another epoch, ErrNotFound otherwise.
func missing(id, current string) error {
	if epoch, ok := epochOf(id); ok && epoch != current {
		return ErrLost
	}
	return ErrNotFound
}
