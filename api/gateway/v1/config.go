package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is one gateway configuration file. Parse and Load return it
// defaulted and validated; a Config built in code must go through Default and
// Validate before a gateway uses it. A Config is plain data: it is safe for
// concurrent reads, and the gateway treats a loaded one as read-only, swapping
// in a new one on reload.
type Config struct {
	// apiVersion must be APIVersion.
	APIVersion string `json:"apiVersion"`
	// kind must be Kind.
	Kind string `json:"kind"`
	// server holds the gateway's HTTP settings.
	Server Server `json:"server,omitzero"`
	// store says where the limiter's state lives.
	Store Store `json:"store,omitzero"`
	// jobs says how jobs, the work sent to /v1/jobs that nobody waits for,
	// are run and kept.
	Jobs Jobs `json:"jobs,omitzero"`
	// batches bounds what tenants keep of OpenAI's Files and Batches APIs:
	// the files they upload and the batches that run them as jobs.
	Batches Batches `json:"batches,omitzero"`
	// kept says how the gateway keeps track of what providers keep for
	// tenants: whose each stored response is, and the background responses
	// it follows to settle them.
	Kept Kept `json:"kept,omitzero"`
	// global limits apply to all tenants and providers together. Calendar
	// windows here reset in UTC. They count no calls in flight: cap those
	// per provider (its maxInFlight) or per plan (an inFlight limit).
	Global []Limit `json:"global,omitempty"`
	// providers are the upstream accounts the gateway calls.
	Providers []Provider `json:"providers,omitempty"`
	// plans are terms that several tenants share, each written once under
	// its name. A plan is written as a tenant without uid, keys or plan:
	// every other field of a tenant, name included, which must be unique
	// among plans. A tenant takes a plan's terms by naming it in its plan
	// field.
	Plans []Tenant `json:"plans,omitempty"`
	// tenants are the customers whose keys the gateway accepts. The tenants
	// of tenantFiles follow them.
	Tenants []Tenant `json:"tenants,omitempty"`
	// tenantFiles name files that hold more tenants, each a TenantList (see
	// TenantListKind), so that a configuration too large for one file, such
	// as a Kubernetes Secret of at most 1 MiB, can be spread over several.
	// Load reads them and appends their tenants, in order, to tenants; Parse
	// reads one document and leaves them unread.
	TenantFiles []TenantFile `json:"tenantFiles,omitempty"`
	// record is the durable record of the calendar windows (see Record):
	// what each scope's budgets and day and month quotas used, from which
	// the gateway re-seeds a store that came back empty or from an older
	// snapshot. The scopes of recordFiles follow them.
	Record []ScopeRecord `json:"record,omitempty"`
	// recordFiles name files that hold more of the record, each a Record,
	// such as the ConfigMaps the operator keeps it in, or a gateway's own
	// answer at /admin/record saved by a job. A relative path resolves
	// against the configuration file's directory. Load reads them and
	// appends their scopes to record; a file that does not exist (yet) holds
	// no scope. Parse leaves them unread.
	RecordFiles []string `json:"recordFiles,omitempty"`
}

// TenantFile names a file of tenants (a TenantList) that belongs to a
// configuration.
type TenantFile struct {
	// path is the file's path. A relative path resolves against the
	// configuration file's directory.
	Path string `json:"path"`
	// sha256 is the lower-case hex SHA-256 of the file's bytes. When set,
	// Load refuses a file that does not match: a configuration read while
	// its files are being replaced one by one is refused, not mixed from
	// old and new files. Empty means any content is accepted.
	SHA256 string `json:"sha256,omitempty"`
}

// TenantList is the document a tenant file holds: tenants, and nothing else
// of a configuration. Its apiVersion is APIVersion and its kind
// TenantListKind. Its tenants may name the plans and must name the
// providers of the configuration that names the file.
type TenantList struct {
	// apiVersion must be APIVersion.
	APIVersion string `json:"apiVersion"`
	// kind must be TenantListKind.
	Kind string `json:"kind"`
	// tenants are appended to the configuration's tenants.
	Tenants []Tenant `json:"tenants,omitempty"`
}

// Server holds the gateway's HTTP settings: how much of a client it reads,
// how long it waits for it, and how much it holds open at once. They bound
// what a slow or hostile client, which needs no key to connect, can hold,
// and keep a gateway past its capacity answering 503 rather than running out
// of file descriptors. No setting bounds how long an answer may take to
// send: a stream lasts as long as its provider sends, while its client
// reads it.
type Server struct {
	// maxBodyBytes caps a request body. Zero means 20 MiB: a few photos sent
	// inline as base64 data URLs (a 6 MB phone photo is 8 MB of base64), within
	// the 50 MB of images a request may carry to OpenAI. A gateway holds each
	// body it reads in memory: maxInFlight × maxBodyBytes bounds what bodies
	// take.
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
	// readHeaderTimeout bounds the time a client has to send a request's
	// headers, on a new connection or one kept alive; past it the gateway
	// closes the connection without an answer. A change takes a restart.
	// Zero means 10s.
	ReadHeaderTimeout metav1.Duration `json:"readHeaderTimeout,omitzero"`
	// readTimeout bounds the time a client has to send a whole request,
	// headers and body, from its first byte, at least readHeaderTimeout;
	// past it the gateway answers 408 and closes the connection. It ends
	// once the body has been read, and so never cuts an answer, however
	// long it streams. Allow maxBodyBytes at your slowest clients' upload
	// rate. A change takes a restart. Zero means 1m.
	ReadTimeout metav1.Duration `json:"readTimeout,omitzero"`
	// idleTimeout is how long a kept-alive connection may wait for its next
	// request before the gateway closes it. Keep it longer than the idle
	// timeout of a load balancer in front, so that the gateway never closes
	// a connection the balancer is about to reuse. A change takes a
	// restart. Zero means 2m.
	IdleTimeout metav1.Duration `json:"idleTimeout,omitzero"`
	// writeTimeout bounds each write of an answer to its client: a client
	// that takes nothing of its answer for this long (it stopped reading but
	// keeps its connection open) is cut off, and counted client_too_slow. A
	// call's slots are freed, and its usage settled, when its provider's
	// answer ends, so a client that stops reading holds them at most this
	// long. Zero means 15s.
	WriteTimeout metav1.Duration `json:"writeTimeout,omitzero"`
	// streamKeepalive is how often a streamed call that waits in the queue
	// is sent an SSE comment, from its first interval on, so that proxies
	// and clients with idle timeouts do not cut it: its status (200) and
	// headers go with the first, and an error after them goes in the
	// stream as an event. A call that is let go within the interval is
	// answered as if none were kept. Zero means 15s.
	StreamKeepalive metav1.Duration `json:"streamKeepalive,omitzero"`
	// maxHeaderBytes caps a request's headers, 4 KiB to 16 MiB; past it
	// the gateway answers 431. A change takes a restart. Zero means
	// 64 KiB.
	MaxHeaderBytes int32 `json:"maxHeaderBytes,omitempty"`
	// maxConnections caps the client connections one gateway holds open,
	// busy or idle, on the API port. A connection past it is not refused:
	// the connection idle longest between requests is closed to make room,
	// and only when none is idle does it wait until another closes. Each
	// takes a file descriptor, and each call in flight may take one more to
	// its provider: keep maxConnections plus maxInFlight, plus a hundred to
	// spare, under the process's limit (ulimit -n); the gateway warns at
	// start when they do not fit. A change takes a restart. Zero means
	// 4096.
	MaxConnections int32 `json:"maxConnections,omitempty"`
	// maxInFlight caps the calls one gateway holds at once: those being
	// read, waiting in a queue, at their provider or streaming back. Past
	// it a call is answered 503 server_overloaded with Retry-After at once,
	// before its body is read. Each tenant, known by its key before the
	// body is read, has a share of it: a call is let in only while its
	// tenant would hold at most seven eighths of what the other tenants
	// leave, its first call whenever one fits. So a tenant alone holds at
	// most 7/8 of maxInFlight, and one that comes finds room at once.
	// Calls with no known key count as one tenant; a configuration of one
	// tenant gives it all. Size it to what the queues should hold (the
	// providers' maxInFlight, plus their rates times the plans' maxWait)
	// and to the memory a call holds (its body and two buffers of 4 KiB),
	// at most maxConnections, so that the connections left carry the
	// refusals. Zero means half of maxConnections: 2048 by default.
	MaxInFlight int32 `json:"maxInFlight,omitempty"`
}

// StoreType says where the limiter's state lives.
type StoreType string

// The store types.
const (
	// StoreMemory keeps state in the gateway's memory: one replica, no
	// dependency.
	StoreMemory StoreType = "memory"
	// StoreRedis keeps state in Redis, shared by every replica.
	StoreRedis StoreType = "redis"
)

// Store says where the limiter's state lives.
type Store struct {
	// type is "memory" (the default) or "redis".
	Type StoreType `json:"type,omitempty"`
	// redis is required when type is "redis" and must be absent otherwise.
	Redis *RedisStore `json:"redis,omitempty"`
}

// Jobs says how jobs are run and kept. Jobs live where the store is: in a
// Redis Stream shared by every replica, or in one gateway's memory, where
// they do not survive a restart.
type Jobs struct {
	// maxAttempts is how many times a job is tried before it fails, 1 to 20.
	// An attempt that dies with its replica counts. Zero means 3.
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
	// reclaimAfter is how long a job waits after an attempt failed, or after
	// the replica holding it stopped renewing it (it died), before it is
	// tried again, at least 1s. A replica renews the jobs it holds every
	// third of this. Zero means 1m.
	ReclaimAfter metav1.Duration `json:"reclaimAfter,omitzero"`
	// resultTTL is how long a finished job, its result or its error, can be
	// read. Zero means 24h.
	ResultTTL metav1.Duration `json:"resultTTL,omitzero"`
	// workers is how many jobs one replica runs at once, 1 to 1000. Zero
	// means 8.
	Workers int32 `json:"workers,omitempty"`
	// maxQueuedPerTenant is the most jobs a tenant may have queued (taken by
	// no worker yet), 1 to 1,000,000; past it, POST /v1/jobs answers 429.
	// Zero means 10000.
	MaxQueuedPerTenant int32 `json:"maxQueuedPerTenant,omitempty"`
	// maxBodyBytes caps the body a job sends its endpoint, 1 byte to 64 MiB,
	// and at most server.maxBodyBytes to be of use; past it, POST /v1/jobs
	// answers 413. Zero means 1 MiB.
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
	// maxResultBytes caps the answer a job keeps, 1 byte to 32 MiB; a job
	// whose answer is larger fails. Zero means 8 MiB.
	MaxResultBytes int64 `json:"maxResultBytes,omitempty"`
	// maxBytesPerTenant caps what a tenant's jobs hold in the store: the
	// bodies of those not finished and the results of those finished within
	// resultTTL. It is at least maxBodyBytes; past it, POST /v1/jobs answers
	// 429. A result is kept even when it passes the cap, so a tenant may hold
	// up to maxResultBytes more per job running. Zero means 256 MiB.
	MaxBytesPerTenant int64 `json:"maxBytesPerTenant,omitempty"`
}

// Batches bounds the files and batches of OpenAI's Files and Batches APIs.
// They live where the store is: in Redis, shared by every replica, or in one
// gateway's memory.
type Batches struct {
	// maxFileBytes caps one uploaded file, 1 byte to 512 MiB; past it,
	// POST /v1/files answers 413. Zero means 100 MiB.
	MaxFileBytes int64 `json:"maxFileBytes,omitempty"`
	// maxFilesPerTenant is the most files a tenant keeps, uploaded and
	// written by its batches, 1 to 100,000; past it, POST /v1/files answers
	// 429. Zero means 500.
	MaxFilesPerTenant int32 `json:"maxFilesPerTenant,omitempty"`
	// maxBytesPerTenant caps what a tenant's files hold, at least
	// maxFileBytes; past it, POST /v1/files answers 429. A batch's output
	// and error files are kept even when they pass it (their lines were
	// paid for). Zero means 1 GiB.
	MaxBytesPerTenant int64 `json:"maxBytesPerTenant,omitempty"`
	// maxLinesPerBatch is the most requests one batch's input file may hold,
	// 1 to 1,000,000. Its lines run as jobs, and count among the tenant's
	// jobs queued (jobs.maxQueuedPerTenant). Zero means 10000.
	MaxLinesPerBatch int32 `json:"maxLinesPerBatch,omitempty"`
	// keepFor is how long a file or a batch is kept after it is made, at
	// least 1h. Zero means 720h, the 30 days OpenAI keeps a batch's output.
	KeepFor metav1.Duration `json:"keepFor,omitzero"`
	// valleyPercent keeps a batch's lines in the valleys of live load: a
	// line in the gateway's queue waits, uncounted, while this gateway's
	// live calls in flight to its provider hold at least this share of the
	// provider's maxInFlight, 1 to 100 (100: a line goes whenever a call in
	// flight is free). A provider without maxInFlight lets lines go. Zero
	// means 25.
	ValleyPercent int32 `json:"valleyPercent,omitempty"`
}

// BatchWay is how a provider's batches run.
type BatchWay string

// The ways a batch runs.
const (
	// BatchesQueue runs each line as a job in the gateway's own queue.
	BatchesQueue BatchWay = "Queue"
	// BatchesService runs the batch on the provider's own batch service.
	BatchesService BatchWay = "Service"
)

// Kept says how the gateway keeps track of what providers keep for tenants.
// It keeps it where the store is: in Redis, shared by every replica, or in
// one gateway's memory.
type Kept struct {
	// ownersFor is how long the gateway remembers which tenant each id of a
	// kept object (a stored response and its items) belongs to, at least
	// 1m: as long as the provider keeps the object. An id it has forgotten
	// is refused to every tenant. Zero means 720h, the 30 days OpenAI keeps
	// a stored response.
	OwnersFor metav1.Duration `json:"ownersFor,omitzero"`
	// followFor is how long the gateway follows a background response to
	// settle it from its final usage, at least 1m. One still running past
	// it, or that can no longer be read (it was deleted), is charged its
	// bound: its model's contextWindow of input and its cap of output. Zero
	// means 24h.
	FollowFor metav1.Duration `json:"followFor,omitzero"`
	// reclaimAfter is how long after the gateway following a background
	// response stopped renewing its hold on it (it died) another gateway
	// takes it over, at least 1s. A gateway renews its holds every third of
	// this. Zero means 30s.
	ReclaimAfter metav1.Duration `json:"reclaimAfter,omitzero"`
}

// FailMode says what the gateway does while Redis is unreachable.
type FailMode string

// The fail modes.
const (
	// FailClosed refuses requests with 503 while Redis is unreachable.
	FailClosed FailMode = "closed"
	// FailOpen limits rates locally at 1/N of each limit for the N
	// replicas last counted, and refuses with 503 what a calendar window
	// (a budget, a day's or month's quota) covers.
	FailOpen FailMode = "open"
)

// RedisStore locates the Redis that holds the shared limiter state, the jobs
// and the gateways' heartbeats, in exactly one of three forms: address (one
// server, or a proxy in front of several), sentinel (a primary found through
// Redis Sentinel, followed through its failovers) or cluster (Redis Cluster).
//
// Limits and budgets must survive a restart of Redis: run it with
// append-only persistence (appendonly yes, appendfsync everysec) and
// maxmemory-policy noeviction. Without them a restart, or an eviction, gives
// every tenant its month's budget and its day's quota back. The gateway
// reports both settings in sluice_gateway_store_persistent and
// sluice_gateway_store_noeviction.
type RedisStore struct {
	// address is the host:port of a standalone Redis. Exactly one of
	// address, sentinel and cluster is set.
	Address string `json:"address,omitempty"`
	// sentinel finds the primary through Redis Sentinel: the gateway asks
	// the sentinels for the primary of masterName, and again after each
	// failover. Calls the failover catches are answered as failMode says.
	Sentinel *RedisSentinel `json:"sentinel,omitempty"`
	// cluster reaches a Redis Cluster through seed nodes. A decision's
	// limits live in the slots of their hash tags; the jobs live in one
	// slot ({sluice-jobs}). With cluster, db must be 0.
	Cluster *RedisCluster `json:"cluster,omitempty"`
	// username is the Redis ACL user the gateway logs in as. Empty means
	// the default user.
	Username string `json:"username,omitempty"`
	// passwordFile is the path of a file holding the Redis password. A
	// relative path resolves against the configuration file's directory.
	// Empty means no password.
	PasswordFile string `json:"passwordFile,omitempty"`
	// tls, when present, connects to Redis (and to the sentinels) over TLS
	// and verifies its certificate.
	TLS *RedisTLS `json:"tls,omitempty"`
	// db is the Redis database number. Zero is database 0, the only one a
	// Cluster has.
	DB int32 `json:"db,omitempty"`
	// failMode is "closed" (the default) or "open". While Redis is
	// unreachable, "closed" answers every call 503 with Retry-After; "open"
	// goes on limiting rates locally, each gateway at its share of every
	// limit (see replicas), and answers 503 to a call that a budget or a
	// day's or month's quota covers: those are never started again from
	// full.
	FailMode FailMode `json:"failMode,omitempty"`
	// replicas is how many gateways share the limits until a gateway has
	// counted them. Each gateway writes a heartbeat into Redis every few
	// seconds and counts the gateways whose heartbeat is alive; failMode
	// "open" limits locally at 1/N of each limit, N being the last count
	// seen, or replicas before any count was (Redis down when the gateway
	// started). Zero means 1.
	Replicas int32 `json:"replicas,omitempty"`
}

// RedisSentinel is how the gateway finds its Redis primary through Redis
// Sentinel.
type RedisSentinel struct {
	// masterName is the name the sentinels monitor the primary under
	// (sentinel monitor <masterName> ...).
	MasterName string `json:"masterName"`
	// addresses are the sentinels' host:port, at least one: list them all,
	// since the gateway needs one of them up to find the primary.
	Addresses []string `json:"addresses"`
	// username is the ACL user the gateway logs in to the sentinels as.
	// Empty means the default user.
	Username string `json:"username,omitempty"`
	// passwordFile is the path of a file holding the sentinels' password,
	// which may differ from Redis's. A relative path resolves against the
	// configuration file's directory. Empty means none.
	PasswordFile string `json:"passwordFile,omitempty"`
}

// RedisCluster is how the gateway reaches a Redis Cluster.
type RedisCluster struct {
	// addresses are host:port of some of the cluster's nodes, at least one;
	// the gateway learns the others, and the slots, from them.
	Addresses []string `json:"addresses"`
}

// Copy returns a copy of r that shares nothing with it.
func (r *RedisStore) Copy() *RedisStore {
	c := *r
	if r.Sentinel != nil {
		s := *r.Sentinel
		s.Addresses = slices.Clone(s.Addresses)
		c.Sentinel = &s
	}
	if r.Cluster != nil {
		c.Cluster = &RedisCluster{Addresses: slices.Clone(r.Cluster.Addresses)}
	}
	if r.TLS != nil {
		tls := *r.TLS
		c.TLS = &tls
	}
	return &c
}

// RedisTLS is how the gateway verifies the Redis it reaches over TLS.
type RedisTLS struct {
	// caFile is the path of a PEM file of the certificate authorities to
	// trust. A relative path resolves against the configuration file's
	// directory. Empty means the system's.
	CAFile string `json:"caFile,omitempty"`
	// serverName is the name every certificate the gateway is shown (by
	// Redis, a Cluster's nodes, the sentinels) must carry. Empty means the
	// host of the address dialled.
	ServerName string `json:"serverName,omitempty"`
}

// Provider is one upstream account: where to call it, which models it
// serves, and the limits and prices that apply to it.
type Provider struct {
	// name identifies the provider: lower-case letters, digits and '-', at
	// most 63 characters, unique.
	Name string `json:"name"`
	// api is the API the provider speaks: "openai" (OpenAI's, and every
	// server that copies it) or "anthropic" (Anthropic's Messages API).
	// Clients call a model in its provider's API: the gateway translates
	// neither to the other. Every provider of a model's pool speaks one API.
	// Empty means "openai".
	API ProviderAPI `json:"api,omitempty"`
	// anthropicVersion is the anthropic-version header a call to an
	// Anthropic provider carries when its client sent none, such as
	// 2023-06-01. Only for api "anthropic"; empty means 2023-06-01.
	AnthropicVersion string `json:"anthropicVersion,omitempty"`
	// baseURL is the absolute http or https URL the API's paths are appended
	// to, such as https://api.openai.com/v1 or https://api.anthropic.com/v1.
	// Empty when endpoints are set.
	BaseURL string `json:"baseURL,omitempty"`
	// endpoints are a self-hosted provider's ready Pods, each as the base URL
	// of one Pod, such as http://10.0.3.7:8000/v1, in place of baseURL. The
	// gateway sends each call to the endpoint with the fewest of its own calls
	// in flight, so that while maxInFlight is the Pods' capacity together, no
	// Pod runs more than its share. Empty means baseURL; a paused provider
	// may have neither.
	Endpoints []string `json:"endpoints,omitempty"`
	// apiKeyFile is the path of a file holding the provider's API key. A
	// relative path resolves against the configuration file's directory.
	// Empty means the provider needs no key.
	APIKeyFile string `json:"apiKeyFile,omitempty"`
	// models are the models this provider serves: at least one. A model
	// listed by several providers is served by their pool: each call goes to
	// the one that can take it soonest (see Pools), and the pool's entries of
	// the model must agree on how its calls are counted (its aliases,
	// encoding and defaultMaxTokens).
	Models []Model `json:"models"`
	// azure, when set, makes the provider an Azure OpenAI resource: a call
	// for a model goes to its deployment, at
	// baseURL/openai/deployments/DEPLOYMENT/PATH?api-version=APIVERSION, with
	// the key in an api-key header. Empty means the OpenAI API at baseURL.
	Azure *Azure `json:"azure,omitempty"`
	// requestsPerMinute is the provider's published request rate, as an
	// entry of limits {dimension: requests, per: minute} says it. Zero
	// means unlimited.
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	// tokensPerMinute is the provider's published token rate, as an entry
	// of limits {dimension: tokens, per: minute} says it. Zero means
	// unlimited.
	TokensPerMinute int64 `json:"tokensPerMinute,omitempty"`
	// limits are the provider's other published limits, each an amount of
	// "requests", "tokens", "inputTokens" or "outputTokens" per "minute" (a
	// rolling minute, as the provider counts it, paced) or per "day" (a
	// calendar day in timeZone), with no dollars, burst or onLimit. Each
	// dimension and period appears once, here or as requestsPerMinute or
	// tokensPerMinute. A call past a day's limit waits in the queue when
	// the day ends within its plan's maxWait, and is otherwise refused 429
	// with Retry-After until the provider's midnight.
	Limits []Limit `json:"limits,omitempty"`
	// timeZone is the IANA time zone in which the provider's day begins,
	// such as "America/Los_Angeles" for Gemini's requests per day. Empty
	// means "UTC".
	TimeZone string `json:"timeZone,omitempty"`
	// cachedInputCounts says whether the prompt tokens a call reads from
	// the provider's cache count toward its token and input-token limits:
	// true, as OpenAI counts them, or false, as Anthropic's current models
	// leave cache reads out of their input tokens per minute. A call's
	// cached tokens are known only from its usage: it is admitted on its
	// whole prompt and settled without them. Nil means true for api
	// "openai" and false for "anthropic".
	CachedInputCounts *bool `json:"cachedInputCounts,omitempty"`
	// outputTokenWeight is how many times each output token counts toward
	// the provider's token and output-token limits, 1 to 100, as Bedrock
	// counts some models' output five times. Plan limits count each token
	// once. Zero means 1.
	OutputTokenWeight int32 `json:"outputTokenWeight,omitempty"`
	// admissionCount is how the provider counts a call against its tokens
	// per minute: "Characters", about four characters a token and the
	// completion's cap when it admits the call, as OpenAI documents it does,
	// or "Tokenizer", the call's usage by the model's encoding. With
	// "Characters" the gateway takes ceil(UTF-8 bytes / 4) and the cap from
	// the provider's own tokens per minute, and keeps it there for the
	// minute after the call (its usage, when that is more), as the provider
	// does; every other limit counts the encoding's estimate and settles to
	// the usage. Empty means "Characters".
	AdmissionCount AdmissionCount `json:"admissionCount,omitempty"`
	// batches says how the batches of OpenAI's Batch API for the provider's
	// models run: "Queue", each line as a job in the gateway's own queue, in
	// the capacity interactive calls leave; or "Service", on the provider's
	// own batch service, which an OpenAI account has: the gateway uploads the
	// lines with the provider's key, follows the provider's batch to its end
	// and charges it at half the provider's prices, its batch prices. Empty
	// means "Queue".
	Batches BatchWay `json:"batches,omitempty"`
	// batchQueueTokens is how many tokens (each line's prompt and cap) the
	// provider's batch service holds enqueued for a model at most, its
	// enqueued token limit: a batch that would pass it waits until batches
	// before it end. Zero means no limit. Only with batches: Service.
	BatchQueueTokens int64 `json:"batchQueueTokens,omitempty"`
	// maxInFlight caps concurrent calls. Zero means unlimited; a provider
	// with no capacity at all is paused instead.
	MaxInFlight int64 `json:"maxInFlight,omitempty"`
	// paused holds every call to the provider in its queue, as for a
	// self-hosted provider with no ready Pods: calls wait, each at most its
	// plan's maxWait (then it is answered busy), and go once the provider is
	// no longer paused. False means calls go as the limits allow.
	Paused bool `json:"paused,omitempty"`
	// headroomPercent is the share of the published limits the gateway uses,
	// 1 to 100. Zero means 100.
	HeadroomPercent int32 `json:"headroomPercent,omitempty"`
	// prices are what the provider charges per million tokens of each class,
	// for calls to a model that has no prices of its own.
	Prices Prices `json:"prices,omitzero"`
	// spendPerMinute caps spend on this provider per minute. Empty means
	// no cap.
	SpendPerMinute Money `json:"spendPerMinute,omitempty"`
	// spendPerMonth caps spend on this provider per calendar month (UTC).
	// Empty means no cap.
	SpendPerMonth Money `json:"spendPerMonth,omitempty"`
	// retry says how failed calls are retried.
	Retry Retry `json:"retry,omitzero"`
	// timeout bounds how long each attempt waits for the provider's answer to
	// begin (its headers). Zero means 60s.
	Timeout metav1.Duration `json:"timeout,omitzero"`
	// stallTimeout bounds how long an answer that has begun may go without
	// a byte from the provider. Past it the call ends: a stream with an
	// error event, any other answer with 504. Zero means 5m.
	StallTimeout metav1.Duration `json:"stallTimeout,omitzero"`
	// callTimeout bounds a call from when it is sent to the end of its answer,
	// every attempt and a whole stream included, at least timeout. Past it the
	// call ends as at stallTimeout. Zero means 30m.
	CallTimeout metav1.Duration `json:"callTimeout,omitzero"`
	// breaker takes a provider that keeps failing out of its models' pools
	// for a while.
	Breaker Breaker `json:"breaker,omitzero"`
}

// ProviderAPI names the API a provider speaks.
type ProviderAPI string

// The APIs a provider may speak.
const (
	// APIOpenAI is OpenAI's API: /v1/chat/completions, /v1/responses and
	// the rest, with the key as a bearer token.
	APIOpenAI ProviderAPI = "openai"
	// APIAnthropic is Anthropic's Messages API: /v1/messages and
	// /v1/messages/count_tokens, with the key in x-api-key and an
	// anthropic-version header.
	APIAnthropic ProviderAPI = "anthropic"
)

// DefaultAnthropicVersion is the anthropic-version a call to an Anthropic
// provider carries when neither its client nor the provider's
// anthropicVersion names one.
const DefaultAnthropicVersion = "2023-06-01"

// Azure is where an Azure OpenAI provider serves its models.
type Azure struct {
	// apiVersion is the api-version every call carries, such as 2024-10-21
	// or 2025-04-01-preview. Required.
	APIVersion string `json:"apiVersion"`
	// deployments maps a model's name to the deployment that serves it. A
	// model not in it is served by the deployment of its own name.
	Deployments map[string]string `json:"deployments,omitempty"`
}

// Deployment is the deployment that serves model.
func (a *Azure) Deployment(model string) string {
	if d, ok := a.Deployments[model]; ok {
		return d
	}
	return model
}

// Breaker is a provider's circuit breaker. Calls that fail in a row (a
// connection refused, reset or timed out, an answer of 5xx) open it: the
// provider leaves the pools of its models, and its calls go to the other
// providers of each, for openFor. Then one call probes it: served, the
// provider is back; failed, it stays out for another openFor. A 429 does not
// count: the provider is there, and its throttle pauses it instead. Each
// gateway keeps its own breaker.
type Breaker struct {
	// failures is how many attempts in a row must fail to open the breaker,
	// 1 to 100. Zero means 5.
	Failures int32 `json:"failures,omitempty"`
	// openFor is how long the breaker stays open before it lets a probe
	// through. Zero means 30s.
	OpenFor metav1.Duration `json:"openFor,omitzero"`
}

// WithHeadroom returns the share of a published limit the gateway may use:
// limit × headroomPercent / 100, rounded down but at least 1 when limit is
// positive. Zero (unlimited) stays zero.
func (p *Provider) WithHeadroom(limit int64) int64 {
	if limit <= 0 || p.HeadroomPercent <= 0 || p.HeadroomPercent >= 100 {
		return limit
	}
	n := limit / 100 * int64(p.HeadroomPercent)
	n += limit % 100 * int64(p.HeadroomPercent) / 100
	return max(n, 1)
}

// PublishedLimits returns every published limit of the provider on requests
// and tokens, before headroom: requestsPerMinute and tokensPerMinute as the
// entries they stand for, then limits.
func (p *Provider) PublishedLimits() []Limit {
	out := make([]Limit, 0, 2+len(p.Limits))
	if p.RequestsPerMinute > 0 {
		out = append(out, Limit{Dimension: DimensionRequests, Amount: p.RequestsPerMinute, Per: PeriodMinute})
	}
	if p.TokensPerMinute > 0 {
		out = append(out, Limit{Dimension: DimensionTokens, Amount: p.TokensPerMinute, Per: PeriodMinute})
	}
	return append(out, p.Limits...)
}

// PerMinute returns the provider's published limit of d per minute, before
// headroom, or zero (unlimited) when it publishes none.
func (p *Provider) PerMinute(d Dimension) int64 {
	switch {
	case d == DimensionRequests && p.RequestsPerMinute > 0:
		return p.RequestsPerMinute
	case d == DimensionTokens && p.TokensPerMinute > 0:
		return p.TokensPerMinute
	}
	for _, l := range p.Limits {
		if l.Dimension == d && l.Per == PeriodMinute {
			return l.Amount
		}
	}
	return 0
}

// CountsCachedInput reports whether the prompt tokens a call reads from the
// provider's cache count toward its token and input-token limits (see
// cachedInputCounts): as set, else as the provider's API counts them.
func (p *Provider) CountsCachedInput() bool {
	if p.CachedInputCounts == nil {
		return p.API != APIAnthropic
	}
	return *p.CachedInputCounts
}

// OutputWeight is how many times each output token counts toward the
// provider's token and output-token limits: outputTokenWeight, at least 1.
func (p *Provider) OutputWeight() int64 { return max(int64(p.OutputTokenWeight), 1) }

// AdmissionCount is how a provider counts a call's prompt against its tokens
// per minute when it admits the call.
type AdmissionCount string

// The admission counts.
const (
	// AdmissionCountTokenizer counts with the model's encoding.
	AdmissionCountTokenizer AdmissionCount = "Tokenizer"
	// AdmissionCountCharacters counts about four characters a token.
	AdmissionCountCharacters AdmissionCount = "Characters"
)

// MaxTokensParam names the request field that caps a chat completion.
type MaxTokensParam string

// The fields that cap a chat completion.
const (
	// MaxTokensParamCompletion is max_completion_tokens: OpenAI's field, which
	// its reasoning models and its current chat models require.
	MaxTokensParamCompletion MaxTokensParam = "max_completion_tokens"
	// MaxTokensParamTokens is max_tokens: the field older models and inference
	// servers such as TGI read.
	MaxTokensParamTokens MaxTokensParam = "max_tokens"
)

// Model is one model a provider serves.
type Model struct {
	// name is the model as clients name it in requests, unique among the
	// provider's models. A dated snapshot (name-YYYY-MM-DD) is a model of its
	// own, with its own prices: list it to serve it, as a name or an alias.
	Name string `json:"name"`
	// aliases are other names clients use for this model. An alias names one
	// model across all providers: no other model's name or alias. A request
	// for an alias goes upstream under name.
	Aliases []string `json:"aliases,omitempty"`
	// encoding is the tiktoken encoding that counts the model's prompt
	// tokens: "cl100k_base", "o200k_base", "p50k_base" or "r50k_base".
	// Empty means the gateway estimates with its documented proxy.
	Encoding string `json:"encoding,omitempty"`
	// defaultMaxTokens is the completion the gateway expects when a request
	// sets no max_tokens. Zero means 256.
	DefaultMaxTokens int64 `json:"defaultMaxTokens,omitempty"`
	// maxTokensParam is the field in which the gateway sends a chat call's
	// cap, the client's own (moved there from the other field) or
	// defaultMaxTokens when it set none, so that the provider writes no more
	// than the gateway estimated: "max_completion_tokens" or "max_tokens". A
	// call to /v1/completions gets max_tokens, that endpoint's only field.
	// Empty means "max_completion_tokens".
	MaxTokensParam MaxTokensParam `json:"maxTokensParam,omitempty"`
	// contextWindow is the most tokens, input and output together, that one
	// call to the model holds. A background response the gateway cannot
	// follow to its end is charged it (see Kept). Zero means 1048576.
	ContextWindow int64 `json:"contextWindow,omitempty"`
	// prices, when set, are what calls to this model cost in place of its
	// provider's prices, whole: a dated snapshot listed as a model of its own
	// (gpt-4o-2024-05-13 beside gpt-4o) has its own prices. Nil means the
	// provider's.
	Prices *Prices `json:"prices,omitempty"`
}

// Prices are what a provider charges, in dollars per million tokens of each
// class of token it bills. A prompt token is cached input, a cache write,
// audio input or else input; a completion token is audio output or else
// output, reasoning included. A class's price left empty is the input price
// (cached input, cache writes, audio input) or the output price (audio
// output): no discount is assumed. Empty input and output prices mean free.
type Prices struct {
	// inputPerMillion is the price of a million prompt tokens of no other
	// class: plain text (and images) read afresh.
	InputPerMillion Money `json:"inputPerMillion,omitempty"`
	// cachedInputPerMillion is the price of a million prompt tokens the
	// provider read from its cache (OpenAI's cached_tokens). Empty means
	// inputPerMillion.
	CachedInputPerMillion Money `json:"cachedInputPerMillion,omitempty"`
	// cacheWritePerMillion is the price of a million prompt tokens the
	// provider wrote to its cache, which Anthropic bills apart; OpenAI
	// reports none. Empty means inputPerMillion.
	CacheWritePerMillion Money `json:"cacheWritePerMillion,omitempty"`
	// audioInputPerMillion is the price of a million prompt tokens of audio.
	// Empty means inputPerMillion.
	AudioInputPerMillion Money `json:"audioInputPerMillion,omitempty"`
	// outputPerMillion is the price of a million completion tokens of text,
	// reasoning tokens included.
	OutputPerMillion Money `json:"outputPerMillion,omitempty"`
	// audioOutputPerMillion is the price of a million completion tokens of
	// audio. Empty means outputPerMillion.
	AudioOutputPerMillion Money `json:"audioOutputPerMillion,omitempty"`
	// tiers are the prices of the provider's service tiers, each named as
	// its answers name it in service_tier, such as "priority" or "flex", at
	// most 16. A call is priced at the tier its answer reports, else at the
	// one its request asked for; at the prices above when that is "auto",
	// "default", none, or a tier not listed here.
	Tiers []TierPrices `json:"tiers,omitempty"`
}

// TierPrices are one service tier's prices, per million tokens of each class
// as in Prices. An empty input or output price is the standard one (that of
// the Prices holding the tier), and an empty class price the tier's own
// input or output price.
type TierPrices struct {
	// name is the tier as the provider's answers name it in service_tier,
	// unique among the tiers: 1 to 63 lower-case letters, digits, '-' and '_',
	// and neither "auto" nor "default", which name the standard prices.
	Name string `json:"name"`
	// inputPerMillion is the tier's price of a million prompt tokens of no
	// other class. Empty means the standard inputPerMillion.
	InputPerMillion Money `json:"inputPerMillion,omitempty"`
	// cachedInputPerMillion is the tier's price of a million cached prompt
	// tokens. Empty means the tier's inputPerMillion.
	CachedInputPerMillion Money `json:"cachedInputPerMillion,omitempty"`
	// cacheWritePerMillion is the tier's price of a million prompt tokens
	// written to the cache. Empty means the tier's inputPerMillion.
	CacheWritePerMillion Money `json:"cacheWritePerMillion,omitempty"`
	// audioInputPerMillion is the tier's price of a million prompt tokens of
	// audio. Empty means the tier's inputPerMillion.
	AudioInputPerMillion Money `json:"audioInputPerMillion,omitempty"`
	// outputPerMillion is the tier's price of a million completion tokens of
	// text. Empty means the standard outputPerMillion.
	OutputPerMillion Money `json:"outputPerMillion,omitempty"`
	// audioOutputPerMillion is the tier's price of a million completion
	// tokens of audio. Empty means the tier's outputPerMillion.
	AudioOutputPerMillion Money `json:"audioOutputPerMillion,omitempty"`
}

// Retry says how calls that failed with 429, 5xx or a connection error are
// retried: exponential backoff with full jitter between baseDelay and
// maxDelay, unless the provider's retry-after says otherwise.
type Retry struct {
	// maxAttempts counts the first call, 1 to 10. Zero means 3.
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
	// baseDelay is the first backoff ceiling. Zero means 500ms.
	BaseDelay metav1.Duration `json:"baseDelay,omitzero"`
	// maxDelay caps the backoff ceiling, at least baseDelay. Zero means 30s.
	MaxDelay metav1.Duration `json:"maxDelay,omitzero"`
}

// Priority is a tenant's class in the queue.
type Priority string

// The priority classes.
const (
	// PriorityInteractive lanes are served first.
	PriorityInteractive Priority = "Interactive"
	// PriorityBatch lanes get what interactive lanes leave, and a small
	// guaranteed share.
	PriorityBatch Priority = "Batch"
)

// ProviderState says what a tenant's calls may leave at the provider: the
// responses it stores, runs in the background and continues.
type ProviderState string

// The provider states.
const (
	// ProviderStateKeep lets the provider keep what the tenant's calls ask
	// it to, each id the tenant's own: stored responses, background runs,
	// continued conversations.
	ProviderStateKeep ProviderState = "Keep"
	// ProviderStateNoStore sends every Responses call with "store": false
	// and refuses those that need the provider to keep something: a
	// background run or a previous response or conversation to continue.
	ProviderStateNoStore ProviderState = "NoStore"
	// ProviderStateRefuse refuses every call that would leave something at
	// the provider: a Responses call must say "store": false.
	ProviderStateRefuse ProviderState = "Refuse"
)

// JobScope says who may read and cancel a tenant's jobs.
type JobScope string

// The job scopes.
const (
	// JobScopeTenant lets every user of a tenant read, list and cancel all
	// its jobs.
	JobScopeTenant JobScope = "Tenant"
	// JobScopeUser lets each user of a tenant read, list and cancel only the
	// jobs its own keys sent.
	JobScopeUser JobScope = "User"
)

// Tenant is one customer: its keys, the providers it may use, and the limits
// that apply to it.
type Tenant struct {
	// name identifies the tenant, unique.
	Name string `json:"name"`
	// uid identifies this tenant for as long as it exists, unique: its jobs
	// are kept under it, so a tenant created again under the name of a
	// deleted one does not see the deleted one's jobs. At most 128 letters,
	// digits and '-', '_', '.', '/'. The operator sets it from its
	// TenantPlan's metadata.uid and the tenant's name. Empty means the name.
	UID string `json:"uid,omitempty"`
	// keys are the tenant's API keys, at least one.
	Keys []Key `json:"keys,omitempty"`
	// plan names the entry of the configuration's plans whose terms the
	// tenant takes: every field below. A tenant that names a plan sets
	// none of them itself. Empty means the tenant carries its own terms.
	// Load and Parse return a tenant with its plan's terms copied in and
	// plan empty, so that the gateway reads every tenant alike.
	Plan string `json:"plan,omitempty"`
	// providers name the providers the tenant may use, at least one.
	Providers []string `json:"providers,omitempty"`
	// priority is "Interactive" (the default) or "Batch".
	Priority Priority `json:"priority,omitempty"`
	// weight is the tenant's share in its priority class, 1 to 1000. Zero
	// means 1.
	Weight int32 `json:"weight,omitempty"`
	// perUser limits apply to each user of the tenant separately, over
	// every provider the tenant uses, and over every gateway sharing the
	// store.
	PerUser []Limit `json:"perUser,omitempty"`
	// perTenant limits apply to all the tenant's users together, over every
	// provider the tenant uses, and over every gateway sharing the store.
	PerTenant []Limit `json:"perTenant,omitempty"`
	// endpoints hold limits for one endpoint each, over all the tenant's
	// users and providers, and over every gateway sharing the store.
	Endpoints []EndpointLimits `json:"endpoints,omitempty"`
	// budget caps the tenant's spend per day or month, over every provider
	// the tenant uses. Nil means no budget.
	Budget *Budget `json:"budget,omitempty"`
	// timeZone is the IANA time zone in which the tenant's calendar windows
	// reset, such as "Europe/Berlin". Empty means "UTC".
	TimeZone string `json:"timeZone,omitempty"`
	// maxWait is the longest a request may expect to wait in the queue; past
	// it the gateway answers busy at once. At most 10m. Zero means 60s.
	MaxWait metav1.Duration `json:"maxWait,omitzero"`
	// degrade sends requests for an expensive model to a cheaper one when
	// the budget runs low. Nil means never; it requires a budget.
	Degrade *Degrade `json:"degrade,omitempty"`
	// jobScope is who may read, list and cancel the tenant's jobs: "Tenant"
	// (the default), every user of the tenant, or "User", only the user
	// whose key sent the job.
	JobScope JobScope `json:"jobScope,omitempty"`
	// providerState is what the tenant's calls may leave at the provider
	// (see ProviderState): "Keep" (the default), "NoStore" or "Refuse".
	ProviderState ProviderState `json:"providerState,omitempty"`
	// storedPrompts are the ids of the prompts stored at the provider
	// (pmpt_…, made in its dashboard) that the tenant's Responses calls may
	// name; any other is refused.
	StoredPrompts []string `json:"storedPrompts,omitempty"`
}

// ID is the tenant's uid, or its name when it has none.
func (t *Tenant) ID() string {
	if t.UID != "" {
		return t.UID
	}
	return t.Name
}

// Key is one tenant API key, by hash.
type Key struct {
	// sha256 is the lower-case hex SHA-256 of the key (see HashKey), unique
	// across all tenants.
	SHA256 string `json:"sha256"`
	// user names the person or service the key belongs to; perUser limits
	// count per user.
	User string `json:"user"`
}

// HashKey returns the lower-case hex SHA-256 of an API key: what Key.SHA256
// holds and what the gateway compares a request's key against.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Endpoint names an OpenAI-compatible endpoint.
type Endpoint string

// The endpoints a tenant's limits can name.
const (
	// EndpointChat is /v1/chat/completions.
	EndpointChat Endpoint = "chat"
	// EndpointCompletions is /v1/completions.
	EndpointCompletions Endpoint = "completions"
	// EndpointEmbeddings is /v1/embeddings.
	EndpointEmbeddings Endpoint = "embeddings"
	// EndpointResponses is /v1/responses.
	EndpointResponses Endpoint = "responses"
	// EndpointModerations is /v1/moderations.
	EndpointModerations Endpoint = "moderations"
	// EndpointMessages is Anthropic's /v1/messages and
	// /v1/messages/count_tokens.
	EndpointMessages Endpoint = "messages"
)

// EndpointLimits are a tenant's limits on one endpoint.
type EndpointLimits struct {
	// endpoint is "chat", "completions", "embeddings", "responses",
	// "moderations" or "messages", unique within a tenant.
	Endpoint Endpoint `json:"endpoint"`
	// limits apply to the endpoint, at least one.
	Limits []Limit `json:"limits"`
}

// Dimension is what a limit counts.
type Dimension string

// The dimensions.
const (
	// DimensionRequests counts requests.
	DimensionRequests Dimension = "requests"
	// DimensionTokens counts prompt plus expected completion tokens,
	// settled from the provider's usage.
	DimensionTokens Dimension = "tokens"
	// DimensionInputTokens counts prompt tokens, settled from the
	// provider's usage.
	DimensionInputTokens Dimension = "inputTokens"
	// DimensionOutputTokens counts completion tokens: the completion's cap
	// when a call starts, settled from the provider's usage as it ends.
	DimensionOutputTokens Dimension = "outputTokens"
	// DimensionDollars counts spend at the provider's prices.
	DimensionDollars Dimension = "dollars"
	// DimensionInFlight counts calls at once: a call holds a slot from when
	// it is let go until its answer ends.
	DimensionInFlight Dimension = "inFlight"
)

// Period is the span a limit's amount covers.
type Period string

// The periods. Second, minute and hour are token-bucket rates; day and month
// are calendar windows.
const (
	PeriodSecond Period = "second"
	PeriodMinute Period = "minute"
	PeriodHour   Period = "hour"
	// PeriodDay resets at midnight in the tenant's time zone, or for a
	// provider's limit in the provider's.
	PeriodDay Period = "day"
	// PeriodMonth resets at midnight on the first of the month in the
	// tenant's time zone.
	PeriodMonth Period = "month"
)

// IsCalendar reports whether p is a calendar window (day or month) rather
// than a rate.
func (p Period) IsCalendar() bool {
	return p == PeriodDay || p == PeriodMonth
}

// Duration returns the span of a rate's period, or 0 for a calendar window,
// whose length depends on the date.
func (p Period) Duration() time.Duration {
	switch p {
	case PeriodSecond:
		return time.Second
	case PeriodMinute:
		return time.Minute
	case PeriodHour:
		return time.Hour
	}
	return 0
}

// Behavior is what the gateway does with a request over a limit.
type Behavior string

// The behaviors at a limit.
const (
	// BehaviorReject answers 429 at once, with Retry-After.
	BehaviorReject Behavior = "Reject"
	// BehaviorQueue holds the request until every budget allows it, or
	// answers busy at once when the expected wait passes the tenant's
	// maxWait.
	BehaviorQueue Behavior = "Queue"
)

// Limit is one limit on one dimension: an amount per period, or, for
// inFlight, calls at once.
type Limit struct {
	// dimension is "requests", "tokens", "inputTokens", "outputTokens",
	// "dollars" or "inFlight".
	Dimension Dimension `json:"dimension"`
	// amount is the number of requests or tokens per period, or of calls at
	// once for inFlight, more than 0. It must be 0 for dollars.
	Amount int64 `json:"amount,omitempty"`
	// dollars is the spend per period, more than 0; for dollars only.
	Dollars Money `json:"dollars,omitempty"`
	// per is "second", "minute" or "hour" for a token-bucket rate, or "day"
	// or "month" for a calendar window. It must be empty for inFlight,
	// which counts calls at once, not per period.
	Per Period `json:"per,omitempty"`
	// burst is a rate's bucket capacity, at least 1. Zero means the amount.
	// It must be 0 for calendar windows and for dollars, whose bucket holds
	// the dollars amount, and for inFlight, which has no bucket.
	Burst int64 `json:"burst,omitempty"`
	// onLimit is "Reject" or "Queue". Empty means "Queue" for rates and
	// inFlight, and "Reject" for calendar windows; "Queue" on a calendar
	// window is an error, since waiting until midnight is not a queue. A
	// call that inFlight queues waits in its own lane, at most its maxWait,
	// until a call it counts with ends; one it rejects is answered 429.
	OnLimit Behavior `json:"onLimit,omitempty"`
}

// Budget caps a tenant's spend per calendar day or month. It acts as a
// dollars limit on a calendar window with onLimit Reject (see Limit).
type Budget struct {
	// amount is the spend allowed per period, more than 0.
	Amount Money `json:"amount"`
	// period is "day" or "month".
	Period Period `json:"period"`
}

// Limit returns the budget as the dollars limit the gateway enforces.
func (b *Budget) Limit() Limit {
	return Limit{Dimension: DimensionDollars, Dollars: b.Amount, Per: b.Period, OnLimit: BehaviorReject}
}

// Degrade sends requests for an expensive model to a cheaper one when the
// tenant's budget runs low, and the response says so in a header.
type Degrade struct {
	// model is the expensive model, served by one of the tenant's providers.
	Model string `json:"model"`
	// fallback is the model requests go to instead, served by one of the
	// tenant's providers.
	Fallback string `json:"fallback"`
	// belowPercent is the share of the budget left, 1 to 99, below which
	// requests are degraded.
	BelowPercent int32 `json:"belowPercent"`
}
