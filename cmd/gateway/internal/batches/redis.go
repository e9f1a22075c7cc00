package batches

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The Redis keys, under one hash tag:
//
//	{sluice-batches}:file:<id>             a file: its JSON in field "file", its content in "content"
//	{sluice-batches}:files:<tenant>        a tenant's files, scored by when they were made (ms)
//	{sluice-batches}:filebytes:<tenant>    the bytes each of a tenant's files holds, by id, and their
//	                                       sum in field "total"
//	{sluice-batches}:batch:<id>            a batch's JSON
//	{sluice-batches}:batches:<tenant>      a tenant's batches, scored by when they were made (ms)
//	{sluice-batches}:lines:<id>            a batch's lines ended so far, by number: "o" (output) or
//	                                       "e" (error), then the line
//	{sluice-batches}:counts:<id>           a batch's lines ended: "completed", "failed", and
//	                                       "closed" once its files hold them
//	{sluice-batches}:open                  the batches that have not ended
//	{sluice-batches}:enqueued:<key>        the tokens a batch service holds enqueued (EnqueuedKey)
//
// <tenant> is the tenant's id. Every key expires KeepFor after it was made (a tenant's indexes
// KeepFor after its last file or batch).
const keyPrefix = "{sluice-batches}:"

func fileKey(id string) string          { return keyPrefix + "file:" + id }
func filesKey(tenant string) string     { return keyPrefix + "files:" + tenant }
func fileBytesKey(tenant string) string { return keyPrefix + "filebytes:" + tenant }
func batchKey(id string) string         { return keyPrefix + "batch:" + id }
func batchesKey(tenant string) string   { return keyPrefix + "batches:" + tenant }
func linesKey(id string) string         { return keyPrefix + "lines:" + id }
func countsKey(id string) string        { return keyPrefix + "counts:" + id }
func enqueuedKey(key string) string     { return keyPrefix + "enqueued:" + key }

const openKey = keyPrefix + "open"

// Redis keeps files and batches in Redis, shared by every gateway replica. It is safe for
// concurrent use.
type Redis struct {
	client redis.UniversalClient
	opts   Options
}

// NewRedis returns a store in the Redis behind client.
func NewRedis(client redis.UniversalClient, opts Options) *Redis {
	opts.defaults()
	return &Redis{client: client, opts: opts}
}

func (r *Redis) keepMillis() int64    { return r.opts.KeepFor.Milliseconds() }
func (r *Redis) expiredBefore() int64 { return r.opts.Now().Add(-r.opts.KeepFor).UnixMilli() }

// addFileScript forgets a tenant's files that expired, then keeps a file unless it is bounded
// and the tenant keeps as many files or bytes as it may. KEYS: the file, the tenant's files,
// their bytes. ARGV: the file's JSON, its content, its id, its score, the expiry score, the most
// files, the most bytes, its size, 1 when bounded, the keys' time to live (ms). It returns 0, or
// 1 for too many files, 2 for too many bytes.
var addFileScript = redis.NewScript(`
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[5])
for _, id in ipairs(gone) do
  local size = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  if size > 0 then redis.call('HINCRBY', KEYS[3], 'total', -size) end
  redis.call('HDEL', KEYS[3], id)
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[5]) end
if ARGV[9] == '1' then
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return 1 end
  local total = tonumber(redis.call('HGET', KEYS[3], 'total') or '0')
  if total + tonumber(ARGV[8]) > tonumber(ARGV[7]) then return 2 end
end
redis.call('HSET', KEYS[1], 'file', ARGV[1], 'content', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[10])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
redis.call('HINCRBY', KEYS[3], 'total', ARGV[8])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[8])
redis.call('PEXPIRE', KEYS[2], ARGV[10])
redis.call('PEXPIRE', KEYS[3], ARGV[10])
return 0
`)

// AddFile keeps f, unless bounded and its tenant keeps as many files or bytes as it may.
func (r *Redis) AddFile(ctx context.Context, f *File, bounded bool) error {
	f.Bytes, f.CreatedAt = int64(len(f.Content)), r.opts.Now()
	f.ExpiresAt = f.CreatedAt.Add(r.opts.KeepFor)
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("batches: encode file %s: %w", f.ID, err)
	}
	bound := "0"
	if bounded {
		bound = "1"
	}
	res, err := addFileScript.Run(ctx, r.client, []string{fileKey(f.ID), filesKey(f.TenantID), fileBytesKey(f.TenantID)},
		data, f.Content, f.ID, f.CreatedAt.UnixMilli(), r.expiredBefore(), r.opts.MaxFilesPerTenant, r.opts.MaxBytesPerTenant,
		f.Bytes, bound, r.keepMillis()).Int()
	switch {
	case err != nil:
		return fmt.Errorf("batches: add file %s: %w", f.ID, err)
	case res == 1:
		return ErrTooManyFiles
	case res == 2:
		return ErrTooManyBytes
	}
	return nil
}

// File returns a file, without its content.
func (r *Redis) File(ctx context.Context, id string) (*File, error) {
	data, err := r.client.HGet(ctx, fileKey(id), "file").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("batches: read file %s: %w", id, err)
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("batches: decode file %s: %w", id, err)
	}
	return &f, nil
}

// Content returns a file's content.
func (r *Redis) Content(ctx context.Context, id string) ([]byte, error) {
	data, err := r.client.HGet(ctx, fileKey(id), "content").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("batches: read file %s: %w", id, err)
	}
	return data, nil
}

// Files returns a tenant's files, newest first, without their content.
func (r *Redis) Files(ctx context.Context, tenantID string) ([]*File, error) {
	ids, err := r.client.ZRevRangeByScore(ctx, filesKey(tenantID), &redis.ZRangeBy{
		Min: strconv.FormatInt(r.expiredBefore(), 10), Max: "+inf", Count: MaxList}).Result()
	if err != nil {
		return nil, fmt.Errorf("batches: list files: %w", err)
	}
	var out []*File
	for _, id := range ids {
		f, err := r.File(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// deleteFileScript forgets a file and the bytes it held. KEYS: the file, its tenant's files,
// their bytes. ARGV: its id. It returns 0 when there was no such file.
var deleteFileScript = redis.NewScript(`
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
local size = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if size > 0 then redis.call('HINCRBY', KEYS[3], 'total', -size) end
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
`)

// DeleteFile forgets a file.
func (r *Redis) DeleteFile(ctx context.Context, id string) error {
	f, err := r.File(ctx, id)
	if err != nil {
		return err
	}
	n, err := deleteFileScript.Run(ctx, r.client, []string{fileKey(id), filesKey(f.TenantID), fileBytesKey(f.TenantID)}, id).Int()
	switch {
	case err != nil:
		return fmt.Errorf("batches: delete file %s: %w", id, err)
	case n == 0:
		return ErrNotFound
	}
	return nil
}

// AddBatch keeps b.
func (r *Redis) AddBatch(ctx context.Context, b *Batch) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("batches: encode batch %s: %w", b.ID, err)
	}
	index := batchesKey(b.TenantID)
	_, err = r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, batchKey(b.ID), data, r.opts.KeepFor)
		pipe.ZRemRangeByScore(ctx, index, "-inf", strconv.FormatInt(r.expiredBefore(), 10))
		pipe.ZAdd(ctx, index, redis.Z{Score: float64(b.CreatedAt.UnixMilli()), Member: b.ID})
		pipe.PExpire(ctx, index, r.opts.KeepFor)
		if !b.Status.Final() {
			pipe.SAdd(ctx, openKey, b.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("batches: add batch %s: %w", b.ID, err)
	}
	return nil
}

// readBatch reads a batch and its counts.
func readBatch(ctx context.Context, c redis.Cmdable, id string) (*Batch, error) {
	data, err := c.Get(ctx, batchKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("batches: read batch %s: %w", id, err)
	}
	var b Batch
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("batches: decode batch %s: %w", id, err)
	}
	counts, err := c.HMGet(ctx, countsKey(id), "completed", "failed").Result()
	if err != nil {
		return nil, fmt.Errorf("batches: read the counts of batch %s: %w", id, err)
	}
	b.Counts = Counts{Completed: count(counts[0]), Failed: count(counts[1])}
	return &b, nil
}

func count(v any) int {
	s, _ := v.(string)
	n, _ := strconv.Atoi(s)
	return n
}

// Batch returns a batch with its counts.
func (r *Redis) Batch(ctx context.Context, id string) (*Batch, error) {
	return readBatch(ctx, r.client, id)
}

// Batches returns a tenant's batches, newest first.
func (r *Redis) Batches(ctx context.Context, tenantID string) ([]*Batch, error) {
	ids, err := r.client.ZRevRangeByScore(ctx, batchesKey(tenantID), &redis.ZRangeBy{
		Min: strconv.FormatInt(r.expiredBefore(), 10), Max: "+inf", Count: MaxList}).Result()
	if err != nil {
		return nil, fmt.Errorf("batches: list batches: %w", err)
	}
	var out []*Batch
	for _, id := range ids {
		b, err := r.Batch(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// updateAttempts bounds the optimistic transaction's retries when other replicas change the same
// batch at once.
const updateAttempts = 10

// UpdateBatch changes a batch by change, which sees it with its counts, in an optimistic
// transaction; a change that returns an error is not kept.
func (r *Redis) UpdateBatch(ctx context.Context, id string, change func(*Batch) error) (*Batch, error) {
	for range updateAttempts {
		var out *Batch
		var changeErr error
		err := r.client.Watch(ctx, func(tx *redis.Tx) error {
			b, err := readBatch(ctx, tx, id)
			if err != nil {
				return err
			}
			out = b
			if changeErr = change(b); changeErr != nil {
				return nil
			}
			data, err := json.Marshal(b)
			if err != nil {
				return fmt.Errorf("batches: encode batch %s: %w", id, err)
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.SetArgs(ctx, batchKey(id), data, redis.SetArgs{KeepTTL: true})
				if b.Status.Final() {
					pipe.SRem(ctx, openKey, id)
				}
				return nil
			})
			return err
		}, batchKey(id))
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue
		case err == nil:
			err = changeErr
		}
		return out, err
	}
	return nil, fmt.Errorf("batches: update batch %s: changed by others %d times in a row", id, updateAttempts)
}

// recordLineScript records a line once, unless the batch's lines are closed. KEYS: the batch's
// lines, its counts. ARGV: the line's number, "completed" or "failed", "o" or "e" and the line,
// the keys' time to live (ms). It returns the counts after it and 1 when it recorded the line.
var recordLineScript = redis.NewScript(`
local new = 0
if not redis.call('HGET', KEYS[2], 'closed') then
  new = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[3])
  if new == 1 then
    redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
  end
end
return {tonumber(redis.call('HGET', KEYS[2], 'completed') or '0'), tonumber(redis.call('HGET', KEYS[2], 'failed') or '0'), new}
`)

// RecordLine records the outcome of a line of a batch, once: a line recorded already, or a line
// of a batch whose lines were dropped, is left as it was. It returns the batch's counts after it,
// and whether this recorded it.
func (r *Redis) RecordLine(ctx context.Context, batchID string, l Line) (Counts, bool, error) {
	field, mark := "failed", "e"
	if l.OK {
		field, mark = "completed", "o"
	}
	res, err := recordLineScript.Run(ctx, r.client, []string{linesKey(batchID), countsKey(batchID)},
		l.N, field, mark+string(l.Data), r.keepMillis()).Int64Slice()
	if err != nil {
		return Counts{}, false, fmt.Errorf("batches: record line %d of batch %s: %w", l.N, batchID, err)
	}
	return Counts{Completed: int(res[0]), Failed: int(res[1])}, res[2] == 1, nil
}

// Lines returns the lines of a batch recorded so far, in the order of its input.
func (r *Redis) Lines(ctx context.Context, batchID string) ([]Line, error) {
	all, err := r.client.HGetAll(ctx, linesKey(batchID)).Result()
	if err != nil {
		return nil, fmt.Errorf("batches: read the lines of batch %s: %w", batchID, err)
	}
	out := make([]Line, 0, len(all))
	for n, v := range all {
		number, err := strconv.Atoi(n)
		if err != nil || v == "" {
			continue
		}
		out = append(out, Line{N: number, OK: v[0] == 'o', Data: []byte(v[1:])})
	}
	slices.SortFunc(out, func(a, b Line) int { return a.N - b.N })
	return out, nil
}

// DropLines forgets the lines of a batch, once its files hold them, and records no more of it;
// its counts stay.
func (r *Redis) DropLines(ctx context.Context, batchID string) error {
	_, err := r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, linesKey(batchID))
		pipe.HSet(ctx, countsKey(batchID), "closed", 1)
		pipe.PExpire(ctx, countsKey(batchID), r.opts.KeepFor)
		return nil
	})
	if err != nil {
		return fmt.Errorf("batches: drop the lines of batch %s: %w", batchID, err)
	}
	return nil
}

// OpenBatches returns the batches that have not ended, with their counts. A batch that expired
// from the store leaves the set as it is found gone.
func (r *Redis) OpenBatches(ctx context.Context) ([]*Batch, error) {
	ids, err := r.client.SMembers(ctx, openKey).Result()
	if err != nil {
		return nil, fmt.Errorf("batches: list the open batches: %w", err)
	}
	var out []*Batch
	for _, id := range ids {
		b, err := r.Batch(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			r.client.SRem(ctx, openKey, id)
		case err != nil:
			return nil, err
		default:
			out = append(out, b)
		}
	}
	return out, nil
}

// reserveScript takes ARGV[1] tokens of KEYS[1] unless that passes ARGV[2] (0: no limit).
var reserveScript = redis.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local limit = tonumber(ARGV[2])
if limit > 0 and n + tonumber(ARGV[1]) > limit then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[1])
return 1
`)

// Reserve takes tokens of what a batch service holds enqueued under key, unless that would pass
// limit (zero: none). It reports whether it took them.
func (r *Redis) Reserve(ctx context.Context, key string, tokens, limit int64) (bool, error) {
	n, err := reserveScript.Run(ctx, r.client, []string{enqueuedKey(key)}, tokens, limit).Int()
	if err != nil {
		return false, fmt.Errorf("batches: reserve enqueued tokens of %s: %w", key, err)
	}
	return n == 1, nil
}

// releaseScript gives back ARGV[1] tokens of KEYS[1], never below zero.
var releaseScript = redis.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0') - tonumber(ARGV[1])
if n < 0 then n = 0 end
redis.call('SET', KEYS[1], n)
return n
`)

// Release gives back tokens Reserve took under key.
func (r *Redis) Release(ctx context.Context, key string, tokens int64) error {
	if err := releaseScript.Run(ctx, r.client, []string{enqueuedKey(key)}, tokens).Err(); err != nil {
		return fmt.Errorf("batches: release enqueued tokens of %s: %w", key, err)
	}
	return nil
}
