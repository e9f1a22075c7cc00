package v1

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a time zone validates the same on every machine, with or without a zoneinfo database
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The values the enumerations and ranges accept.
var (
	storeTypes       = []StoreType{StoreMemory, StoreRedis}
	failModes        = []FailMode{FailClosed, FailOpen}
	priorities       = []Priority{PriorityInteractive, PriorityBatch}
	endpoints        = []Endpoint{EndpointChat, EndpointCompletions, EndpointEmbeddings, EndpointResponses, EndpointModerations, EndpointMessages}
	dimensions       = []Dimension{DimensionRequests, DimensionTokens, DimensionInputTokens, DimensionOutputTokens, DimensionDollars, DimensionInFlight}
	providerDims     = []Dimension{DimensionRequests, DimensionTokens, DimensionInputTokens, DimensionOutputTokens}
	providerPeriods  = []Period{PeriodMinute, PeriodDay}
	maxOutputWeight  = int64(100)
	periods          = []Period{PeriodSecond, PeriodMinute, PeriodHour, PeriodDay, PeriodMonth}
	calendarPeriods  = []Period{PeriodDay, PeriodMonth}
	behaviors        = []Behavior{BehaviorReject, BehaviorQueue}
	encodings        = []string{"cl100k_base", "o200k_base", "p50k_base", "r50k_base"}
	maxTokensParams  = []MaxTokensParam{MaxTokensParamCompletion, MaxTokensParamTokens}
	admissionCounts  = []AdmissionCount{AdmissionCountTokenizer, AdmissionCountCharacters}
	providerAPIs     = []ProviderAPI{APIOpenAI, APIAnthropic}
	keyHashPattern   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	maxMaxWait       = 10 * time.Minute
	maxRetryAttempts = int64(10)
	maxWeight        = int64(1000)
	maxJobAttempts   = int64(20)
	maxJobWorkers    = int64(1000)
	maxJobsQueued    = int64(1_000_000)
	maxJobBodyBytes  = int64(64 << 20)
	maxJobResult     = int64(32 << 20)
	maxBatchFile     = int64(512 << 20)
	maxBatchFiles    = int64(100_000)
	maxBatchLines    = int64(1_000_000)
	jobScopes        = []JobScope{JobScopeTenant, JobScopeUser}
	providerStates   = []ProviderState{ProviderStateKeep, ProviderStateNoStore, ProviderStateRefuse}
	batchWays        = []BatchWay{BatchesQueue, BatchesService}
	uidPattern       = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_./]{0,127}$`)
	minReclaimAfter  = time.Second
	minHeaderBytes   = int64(4 << 10)
	maxHeaderBytes   = int64(16 << 20)
)

// Validate checks a defaulted Config (see Default) and returns every problem
// at once, each naming its field path and the value at fault, as a
// k8s.io/apimachinery aggregate of *field.Error. It never quotes key hashes
// or anything that may hold a credential.
func (c *Config) Validate() error {
	errs := validateTypeMeta(c.APIVersion, c.Kind, Kind)
	errs = append(errs, c.Server.validate(field.NewPath("server"))...)
	errs = append(errs, c.Store.validate(field.NewPath("store"))...)
	errs = append(errs, c.Jobs.validate(field.NewPath("jobs"))...)
	errs = append(errs, c.Kept.validate(field.NewPath("kept"))...)
	errs = append(errs, c.Batches.validate(field.NewPath("batches"))...)
	errs = append(errs, validateGlobal(field.NewPath("global"), c.Global)...)
	errs = append(errs, validateProviders(field.NewPath("providers"), c.Providers)...)
	errs = append(errs, validatePlans(field.NewPath("plans"), c.Plans, c.Providers)...)
	errs = append(errs, validateTenants(field.NewPath("tenants"), c.Tenants, planNames(c.Plans), c.Providers)...)
	errs = append(errs, validateRecord(field.NewPath("record"), c.Record)...)
	errs = append(errs, validateTenantFiles(field.NewPath("tenantFiles"), c.TenantFiles)...)
	return errs.ToAggregate()
}

// validateTypeMeta checks a document's apiVersion, and that its kind is
// kind.
func validateTypeMeta(apiVersion, kind, want string) field.ErrorList {
	errs := validateEnum(field.NewPath("apiVersion"), apiVersion, []string{APIVersion})
	return append(errs, validateEnum(field.NewPath("kind"), kind, []string{want})...)
}

func (s *Server) validate(p *field.Path) field.ErrorList {
	errs := validatePositive(p.Child("maxBodyBytes"), s.MaxBodyBytes)
	errs = append(errs, validatePositiveDuration(p.Child("readHeaderTimeout"), s.ReadHeaderTimeout)...)
	errs = append(errs, validatePositiveDuration(p.Child("readTimeout"), s.ReadTimeout)...)
	if s.ReadTimeout.Duration > 0 && s.ReadTimeout.Duration < s.ReadHeaderTimeout.Duration {
		errs = append(errs, field.Invalid(p.Child("readTimeout"), s.ReadTimeout.Duration.String(),
			fmt.Sprintf("must be at least readHeaderTimeout (%s): it covers the headers too", s.ReadHeaderTimeout.Duration)))
	}
	errs = append(errs, validatePositiveDuration(p.Child("idleTimeout"), s.IdleTimeout)...)
	errs = append(errs, validatePositiveDuration(p.Child("writeTimeout"), s.WriteTimeout)...)
	errs = append(errs, validatePositiveDuration(p.Child("streamKeepalive"), s.StreamKeepalive)...)
	errs = append(errs, validateRange(p.Child("maxHeaderBytes"), int64(s.MaxHeaderBytes), minHeaderBytes, maxHeaderBytes)...)
	errs = append(errs, validatePositive(p.Child("maxConnections"), int64(s.MaxConnections))...)
	errs = append(errs, validatePositive(p.Child("maxInFlight"), int64(s.MaxInFlight))...)
	if s.MaxInFlight > s.MaxConnections {
		errs = append(errs, field.Invalid(p.Child("maxInFlight"), s.MaxInFlight,
			fmt.Sprintf("must be at most maxConnections (%d): a call needs a connection, and a refusal one to be sent on", s.MaxConnections)))
	}
	return errs
}

func (s *Store) validate(p *field.Path) field.ErrorList {
	switch {
	case s.Type == StoreMemory && s.Redis != nil:
		return field.ErrorList{field.Forbidden(p.Child("redis"), `must be absent when type is "memory"`)}
	case s.Type == StoreRedis && s.Redis == nil:
		return field.ErrorList{field.Required(p.Child("redis"), `required when type is "redis"`)}
	case s.Type == StoreRedis:
		return s.Redis.validate(p.Child("redis"))
	case s.Type != StoreMemory:
		return field.ErrorList{field.NotSupported(p.Child("type"), s.Type, storeTypes)}
	}
	return nil
}

func (r *RedisStore) validate(p *field.Path) field.ErrorList {
	errs := r.validateForm(p)
	if r.Username != "" && r.PasswordFile == "" { // Redis logs a user in only with a password
		errs = append(errs, field.Required(p.Child("passwordFile"), "must be set when username is"))
	}
	errs = append(errs, validateNonNegative(p.Child("db"), int64(r.DB))...)
	if r.Cluster != nil && r.DB != 0 {
		errs = append(errs, field.Invalid(p.Child("db"), r.DB, "must be 0 with cluster: a Redis Cluster has only database 0"))
	}
	errs = append(errs, validateEnum(p.Child("failMode"), r.FailMode, failModes)...)
	return append(errs, validatePositive(p.Child("replicas"), int64(r.Replicas))...)
}

// validateForm checks that exactly one of address, sentinel and cluster is set, and that one.
func (r *RedisStore) validateForm(p *field.Path) field.ErrorList {
	var set []string
	for _, form := range []struct {
		name string
		set  bool
	}{{"address", r.Address != ""}, {"sentinel", r.Sentinel != nil}, {"cluster", r.Cluster != nil}} {
		if form.set {
			set = append(set, form.name)
		}
	}
	switch {
	case len(set) == 0:
		return field.ErrorList{field.Required(p.Child("address"), "must set exactly one of address (one server), sentinel or cluster")}
	case len(set) > 1:
		return field.ErrorList{field.Forbidden(p.Child(set[1]), "must not be set with "+set[0]+": set exactly one of address, sentinel and cluster")}
	case r.Sentinel != nil:
		return r.Sentinel.validate(p.Child("sentinel"))
	case r.Cluster != nil:
		return validateAddresses(p.Child("cluster", "addresses"), r.Cluster.Addresses)
	}
	return validateHostPort(p.Child("address"), r.Address)
}

func (s *RedisSentinel) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MasterName == "" || strings.ContainsFunc(s.MasterName, unicode.IsSpace) {
		errs = append(errs, field.Required(p.Child("masterName"), "must name the primary the sentinels monitor, without spaces"))
	}
	errs = append(errs, validateAddresses(p.Child("addresses"), s.Addresses)...)
	if s.Username != "" && s.PasswordFile == "" {
		errs = append(errs, field.Required(p.Child("passwordFile"), "must be set when username is"))
	}
	return errs
}

// validateAddresses checks a list of host:port, at least one, each once.
func validateAddresses(p *field.Path, addrs []string) field.ErrorList {
	if len(addrs) == 0 {
		return field.ErrorList{field.Required(p, "must list at least one host:port")}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, a := range addrs {
		if seen[a] {
			errs = append(errs, field.Duplicate(p.Index(i), a))
			continue
		}
		seen[a] = true
		errs = append(errs, validateHostPort(p.Index(i), a)...)
	}
	return errs
}

func validateHostPort(p *field.Path, addr string) field.ErrorList {
	if addr == "" {
		return field.ErrorList{field.Required(p, "must be host:port")}
	}
	if strings.ContainsAny(addr, "@/") { // a URL, perhaps with a password in it
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be host:port, not a URL; put a password in passwordFile")}
	}
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return field.ErrorList{field.Invalid(p, addr, "must be host:port with a port from 1 to 65535")}
	}
	return nil
}

func (j *Jobs) validate(p *field.Path) field.ErrorList {
	errs := validateRange(p.Child("maxAttempts"), int64(j.MaxAttempts), 1, maxJobAttempts)
	errs = append(errs, validateMinDuration(p.Child("reclaimAfter"), j.ReclaimAfter, minReclaimAfter)...)
	errs = append(errs, validatePositiveDuration(p.Child("resultTTL"), j.ResultTTL)...)
	errs = append(errs, validateRange(p.Child("workers"), int64(j.Workers), 1, maxJobWorkers)...)
	errs = append(errs, validateRange(p.Child("maxQueuedPerTenant"), int64(j.MaxQueuedPerTenant), 1, maxJobsQueued)...)
	errs = append(errs, validateRange(p.Child("maxBodyBytes"), j.MaxBodyBytes, 1, maxJobBodyBytes)...)
	errs = append(errs, validateRange(p.Child("maxResultBytes"), j.MaxResultBytes, 1, maxJobResult)...)
	if j.MaxBytesPerTenant < j.MaxBodyBytes {
		errs = append(errs, field.Invalid(p.Child("maxBytesPerTenant"), j.MaxBytesPerTenant, "must be at least maxBodyBytes, or no job fits"))
	}
	return errs
}

func (b *Batches) validate(p *field.Path) field.ErrorList {
	errs := validateRange(p.Child("maxFileBytes"), b.MaxFileBytes, 1, maxBatchFile)
	errs = append(errs, validateRange(p.Child("maxFilesPerTenant"), int64(b.MaxFilesPerTenant), 1, maxBatchFiles)...)
	errs = append(errs, validateRange(p.Child("maxLinesPerBatch"), int64(b.MaxLinesPerBatch), 1, maxBatchLines)...)
	errs = append(errs, validateMinDuration(p.Child("keepFor"), b.KeepFor, time.Hour)...)
	errs = append(errs, validateRange(p.Child("valleyPercent"), int64(b.ValleyPercent), 1, 100)...)
	if b.MaxBytesPerTenant < b.MaxFileBytes {
		errs = append(errs, field.Invalid(p.Child("maxBytesPerTenant"), b.MaxBytesPerTenant, "must be at least maxFileBytes, or no file fits"))
	}
	return errs
}

func (k *Kept) validate(p *field.Path) field.ErrorList {
	errs := validateMinDuration(p.Child("ownersFor"), k.OwnersFor, time.Minute)
	errs = append(errs, validateMinDuration(p.Child("followFor"), k.FollowFor, time.Minute)...)
	return append(errs, validateMinDuration(p.Child("reclaimAfter"), k.ReclaimAfter, time.Second)...)
}

func validateProviders(p *field.Path, providers []Provider) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	pools := map[string]pooled{} // a model's name or alias → where it was first seen
	for i := range providers {
		paths := NewProviderPaths(p.Index(i))
		errs = append(errs, ValidateProvider(paths, &providers[i])...)
		errs = append(errs, validateUnique(paths.Name, providers[i].Name, names)...)
		for j := range providers[i].Models {
			errs = append(errs, validatePooled(paths.Models.Index(j), &providers[i], &providers[i].Models[j], pools)...)
		}
	}
	return errs
}

// pooled is a model as a provider lists it.
type pooled struct {
	provider string
	api      ProviderAPI
	model    *Model
}

// validatePooled checks a model of provider pr against the providers before
// it that list a model of one of its names (see PoolConflict).
func validatePooled(p *field.Path, pr *Provider, m *Model, seen map[string]pooled) field.ErrorList {
	var errs field.ErrorList
	for k, name := range append([]string{m.Name}, m.Aliases...) {
		at := p.Child("name")
		if k > 0 {
			at = p.Child("aliases").Index(k - 1)
		}
		first, ok := seen[name]
		switch {
		case name == "":
		case !ok:
			seen[name] = pooled{pr.Name, pr.API, m}
		case first.provider == pr.Name:
			errs = append(errs, field.Duplicate(at, name))
		case first.api != pr.API:
			errs = append(errs, field.Invalid(at, name, fmt.Sprintf("must be served by providers of one API: provider %q serves it in the %s API, this one in the %s API", first.provider, first.api, pr.API)))
		case k == 0:
			if conflict := PoolConflict(first.model, m); conflict != "" {
				errs = append(errs, field.Invalid(at, name, fmt.Sprintf("%s in provider %q, which serves it too", conflict, first.provider)))
			}
		case first.model.Name != m.Name:
			errs = append(errs, field.Invalid(at, name, fmt.Sprintf("must name one model: provider %q has it for %q", first.provider, first.model.Name)))
		}
	}
	return errs
}

// PoolConflict says why two providers' entries of a model may not pool (the
// second's fault), or returns "". Entries of one name pool when they count a
// call alike, since the gateway counts it before it knows which provider
// serves it: the same name, aliases, encoding and defaultMaxTokens. Prices,
// limits and maxTokensParam may differ.
func PoolConflict(first, m *Model) string {
	switch {
	case first.Name != m.Name:
		return fmt.Sprintf("must name one model, but is an alias of %q", first.Name)
	case !slices.Equal(sortedCopy(first.Aliases), sortedCopy(m.Aliases)):
		return fmt.Sprintf("must have the same aliases (%s)", strings.Join(first.Aliases, ", "))
	case first.Encoding != m.Encoding:
		return fmt.Sprintf("must have the same encoding (%q)", first.Encoding)
	case first.DefaultMaxTokens != m.DefaultMaxTokens:
		return fmt.Sprintf("must have the same defaultMaxTokens (%d)", first.DefaultMaxTokens)
	}
	return ""
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// ProviderPaths are the field paths at which ValidateProvider reports the
// fields of a Provider it checks. A configuration file holds them all under
// the provider's own path (see NewProviderPaths); an object a Provider is
// compiled from may hold them elsewhere, as a ProviderQuota holds
// requestsPerMinute in spec.limits. Every path must be set.
type ProviderPaths struct {
	Name, BaseURL, Endpoints, Models                *field.Path
	API, AnthropicVersion                           *field.Path
	RequestsPerMinute, TokensPerMinute, MaxInFlight *field.Path
	// Limit returns the path of limits[i], which is l.
	Limit                           func(i int, l Limit) *field.Path
	TimeZone, OutputTokenWeight     *field.Path
	AdmissionCount, HeadroomPercent *field.Path
	Batches, BatchQueueTokens       *field.Path
	// Prices and Retry are the paths of structs whose fields have the same
	// JSON names wherever they are held.
	Prices, Retry                      *field.Path
	SpendPerMinute, SpendPerMonth      *field.Path
	Timeout, StallTimeout, CallTimeout *field.Path
	Azure, Breaker                     *field.Path
}

// NewProviderPaths returns the paths of a provider's fields in a
// configuration file: each its JSON name under p.
func NewProviderPaths(p *field.Path) ProviderPaths {
	return ProviderPaths{
		Name:              p.Child("name"),
		BaseURL:           p.Child("baseURL"),
		Endpoints:         p.Child("endpoints"),
		Models:            p.Child("models"),
		API:               p.Child("api"),
		AnthropicVersion:  p.Child("anthropicVersion"),
		RequestsPerMinute: p.Child("requestsPerMinute"),
		TokensPerMinute:   p.Child("tokensPerMinute"),
		MaxInFlight:       p.Child("maxInFlight"),
		Limit:             func(i int, _ Limit) *field.Path { return p.Child("limits").Index(i) },
		TimeZone:          p.Child("timeZone"),
		OutputTokenWeight: p.Child("outputTokenWeight"),
		AdmissionCount:    p.Child("admissionCount"),
		HeadroomPercent:   p.Child("headroomPercent"),
		Batches:           p.Child("batches"),
		BatchQueueTokens:  p.Child("batchQueueTokens"),
		Prices:            p.Child("prices"),
		Retry:             p.Child("retry"),
		SpendPerMinute:    p.Child("spendPerMinute"),
		SpendPerMonth:     p.Child("spendPerMonth"),
		Timeout:           p.Child("timeout"),
		StallTimeout:      p.Child("stallTimeout"),
		CallTimeout:       p.Child("callTimeout"),
		Azure:             p.Child("azure"),
		Breaker:           p.Child("breaker"),
	}
}

// ValidateProvider checks one defaulted provider on its own (see
// Provider.Default), reporting each field at its path in paths. Names and
// models unique across providers are the Config's to check (see Validate).
func ValidateProvider(paths ProviderPaths, pr *Provider) field.ErrorList {
	errs := validateDNSLabel(paths.Name, pr.Name)
	errs = append(errs, pr.validateWhere(paths)...)
	errs = append(errs, validateModels(paths.Models, pr.Models)...)
	errs = append(errs, validateNonNegative(paths.RequestsPerMinute, pr.RequestsPerMinute)...)
	errs = append(errs, validateNonNegative(paths.TokensPerMinute, pr.TokensPerMinute)...)
	errs = append(errs, validateEnum(paths.AdmissionCount, pr.AdmissionCount, admissionCounts)...)
	errs = append(errs, validateNonNegative(paths.MaxInFlight, pr.MaxInFlight)...)
	errs = append(errs, pr.validateLimits(paths)...)
	errs = append(errs, validateTimeZone(paths.TimeZone, pr.TimeZone)...)
	errs = append(errs, validateRange(paths.OutputTokenWeight, int64(pr.OutputTokenWeight), 1, maxOutputWeight)...)
	errs = append(errs, validateRange(paths.HeadroomPercent, int64(pr.HeadroomPercent), 1, 100)...)
	errs = append(errs, pr.Prices.validate(paths.Prices)...)
	errs = append(errs, validateMoney(paths.SpendPerMinute, pr.SpendPerMinute, false)...)
	errs = append(errs, validateMoney(paths.SpendPerMonth, pr.SpendPerMonth, false)...)
	errs = append(errs, pr.Retry.validate(paths.Retry)...)
	errs = append(errs, pr.validateProviderRates(paths)...)
	errs = append(errs, pr.validateAzure(paths)...)
	errs = append(errs, pr.validateAPI(paths)...)
	errs = append(errs, pr.validateBatches(paths)...)
	errs = append(errs, validateRange(paths.Breaker.Child("failures"), int64(pr.Breaker.Failures), 1, maxBreakerFailures)...)
	errs = append(errs, validatePositiveDuration(paths.Breaker.Child("openFor"), pr.Breaker.OpenFor)...)
	return append(errs, pr.validateTimeouts(paths)...)
}

// validateLimits checks the provider's limits: each a positive amount of
// requests or tokens per minute or day, as a provider limits them, and no
// dimension and period twice, counting requestsPerMinute and tokensPerMinute.
func (pr *Provider) validateLimits(paths ProviderPaths) field.ErrorList {
	var errs field.ErrorList
	seen := map[Limit]bool{
		{Dimension: DimensionRequests, Per: PeriodMinute}: pr.RequestsPerMinute > 0,
		{Dimension: DimensionTokens, Per: PeriodMinute}:   pr.TokensPerMinute > 0,
	}
	for i, l := range pr.Limits {
		p := paths.Limit(i, l)
		errs = append(errs, l.validateProvider(p)...)
		id := Limit{Dimension: l.Dimension, Per: l.Per}
		if seen[id] {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s per %s", l.Dimension, l.Per)))
		}
		seen[id] = true
	}
	return errs
}

// validateProvider checks one of a provider's limits: an amount of requests
// or tokens per minute or day, and nothing else.
func (l *Limit) validateProvider(p *field.Path) field.ErrorList {
	errs := validateEnum(p.Child("dimension"), l.Dimension, providerDims)
	errs = append(errs, validateEnum(p.Child("per"), l.Per, providerPeriods)...)
	errs = append(errs, validatePositive(p.Child("amount"), l.Amount)...)
	if l.Dollars != "" {
		errs = append(errs, field.Invalid(p.Child("dollars"), l.Dollars, "must be empty for a provider's limit, which counts requests or tokens"))
	}
	if l.Burst != 0 {
		errs = append(errs, field.Invalid(p.Child("burst"), l.Burst, "must be 0 for a provider's limit: the gateway paces its minute as the provider counts it"))
	}
	if l.OnLimit != "" {
		errs = append(errs, field.Invalid(p.Child("onLimit"), l.OnLimit, "must be empty for a provider's limit, which always queues within the plan's maxWait"))
	}
	return errs
}

// maxBreakerFailures is the most failures in a row a breaker may wait for.
const maxBreakerFailures = 100

// azureAPIVersion is the form of an Azure OpenAI api-version: a date, and
// -preview for a preview.
var azureAPIVersion = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$`)

// azureDeployment is the form of an Azure OpenAI deployment's name.
var azureDeployment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validateAzure checks an Azure provider: a version, a baseURL (never Pods)
// and deployments for its own models.
func (pr *Provider) validateAzure(paths ProviderPaths) field.ErrorList {
	a := pr.Azure
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if !azureAPIVersion.MatchString(a.APIVersion) {
		errs = append(errs, field.Invalid(paths.Azure.Child("apiVersion"), a.APIVersion, "must be an api-version such as 2024-10-21 or 2025-04-01-preview"))
	}
	if len(pr.Endpoints) > 0 {
		errs = append(errs, field.Invalid(paths.Endpoints, len(pr.Endpoints), "must be empty for an Azure provider: its calls go to baseURL"))
	}
	for _, model := range slices.Sorted(maps.Keys(a.Deployments)) {
		dp := paths.Azure.Child("deployments").Key(model)
		if !slices.ContainsFunc(pr.Models, func(m Model) bool { return m.Name == model }) {
			errs = append(errs, field.Invalid(dp, model, "must be the name of one of the provider's models"))
		}
		if d := a.Deployments[model]; !azureDeployment.MatchString(d) {
			errs = append(errs, field.Invalid(dp, d, "must be a deployment name: letters, digits, '.', '_' and '-', at most 64"))
		}
	}
	return errs
}

// anthropicVersion is the form of an anthropic-version: a date.
var anthropicVersion = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

// validateAPI checks the provider's API and what goes with it: an
// anthropicVersion for an Anthropic provider alone, and Azure for an OpenAI
// one alone.
func (pr *Provider) validateAPI(paths ProviderPaths) field.ErrorList {
	errs := validateEnum(paths.API, pr.API, providerAPIs)
	switch {
	case pr.API != APIAnthropic && pr.AnthropicVersion != "":
		errs = append(errs, field.Invalid(paths.AnthropicVersion, pr.AnthropicVersion, "must be empty unless api is anthropic"))
	case pr.API == APIAnthropic && !anthropicVersion.MatchString(pr.AnthropicVersion):
		errs = append(errs, field.Invalid(paths.AnthropicVersion, pr.AnthropicVersion, "must be an anthropic-version such as 2023-06-01"))
	}
	if pr.API == APIAnthropic && pr.Azure != nil {
		errs = append(errs, field.Invalid(paths.Azure, "azure", "must be empty for an Anthropic provider: Azure serves the OpenAI API"))
	}
	return errs
}

// validateBatches checks the way the provider's batches run: on its batch
// service only for a hosted OpenAI account, whose Batch API the gateway calls.
func (pr *Provider) validateBatches(paths ProviderPaths) field.ErrorList {
	errs := validateEnum(paths.Batches, pr.Batches, batchWays)
	errs = append(errs, validateNonNegative(paths.BatchQueueTokens, pr.BatchQueueTokens)...)
	switch {
	case pr.Batches != BatchesService && pr.BatchQueueTokens != 0:
		errs = append(errs, field.Invalid(paths.BatchQueueTokens, pr.BatchQueueTokens, "must be zero unless batches is Service"))
	case pr.Batches != BatchesService:
	case len(pr.Endpoints) > 0:
		errs = append(errs, field.Invalid(paths.Batches, pr.Batches, "must be Queue for a self-hosted provider: it has no batch service"))
	case pr.API != APIOpenAI || pr.Azure != nil:
		errs = append(errs, field.Invalid(paths.Batches, pr.Batches, "must be Queue unless the provider is an OpenAI account: the gateway calls OpenAI's Batch API"))
	}
	return errs
}

// validateTimeouts checks that every timeout is positive and that a call may
// last at least as long as one attempt waits for its answer to begin.
func (pr *Provider) validateTimeouts(paths ProviderPaths) field.ErrorList {
	errs := validatePositiveDuration(paths.Timeout, pr.Timeout)
	errs = append(errs, validatePositiveDuration(paths.StallTimeout, pr.StallTimeout)...)
	errs = append(errs, validatePositiveDuration(paths.CallTimeout, pr.CallTimeout)...)
	if len(errs) == 0 && pr.CallTimeout.Duration < pr.Timeout.Duration {
		errs = append(errs, field.Invalid(paths.CallTimeout, pr.CallTimeout.Duration.String(), "must be at least timeout ("+pr.Timeout.Duration.String()+")"))
	}
	return errs
}

func validateDNSLabel(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, strings.Join(msgs, "; "))}
	}
	return nil
}

// validateWhere checks where the provider's calls go: baseURL, or the
// endpoints of its Pods, never both. Only a paused provider, which sends no
// call, may have neither.
func (pr *Provider) validateWhere(paths ProviderPaths) field.ErrorList {
	switch {
	case len(pr.Endpoints) > 0 && pr.BaseURL != "":
		return field.ErrorList{field.Invalid(paths.Endpoints, len(pr.Endpoints), "must be empty when baseURL is set: calls go to one or the other")}
	case len(pr.Endpoints) > 0:
		var errs field.ErrorList
		for i, e := range pr.Endpoints {
			errs = append(errs, validateBaseURL(paths.Endpoints.Index(i), e)...)
		}
		return errs
	case pr.BaseURL == "" && pr.Paused:
		return nil
	}
	return validateBaseURL(paths.BaseURL, pr.BaseURL)
}

func validateBaseURL(p *field.Path, s string) field.ErrorList {
	const want = "must be an absolute http or https URL"
	if s == "" {
		return field.ErrorList{field.Required(p, want+", unless endpoints are set or the provider is paused")}
	}
	u, err := url.Parse(s)
	switch {
	case strings.Contains(s, "@") && (err != nil || u.User != nil):
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must not hold credentials; put the key in apiKeyFile")}
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return field.ErrorList{field.Invalid(p, s, want)}
	case u.RawQuery != "" || u.Fragment != "": // a query may carry a key
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must have no query or fragment")}
	}
	return nil
}

func validateModels(p *field.Path, models []Model) field.ErrorList {
	if len(models) == 0 {
		return field.ErrorList{field.Required(p, "at least one model")}
	}
	var errs field.ErrorList
	for i, m := range models {
		mp := p.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		}
		for k, alias := range m.Aliases {
			if alias == "" {
				errs = append(errs, field.Required(mp.Child("aliases").Index(k), ""))
			}
		}
		if m.Encoding != "" {
			errs = append(errs, validateEnum(mp.Child("encoding"), m.Encoding, encodings)...)
		}
		errs = append(errs, validatePositive(mp.Child("defaultMaxTokens"), m.DefaultMaxTokens)...)
		errs = append(errs, validatePositive(mp.Child("contextWindow"), m.ContextWindow)...)
		errs = append(errs, validateEnum(mp.Child("maxTokensParam"), m.MaxTokensParam, maxTokensParams)...)
		if m.Prices != nil {
			errs = append(errs, m.Prices.validate(mp.Child("prices"))...)
		}
	}
	return errs
}

// maxTiers is the most service tiers one Prices may list.
const maxTiers = 16

// tierName is the form of a service tier's name.
var tierName = regexp.MustCompile(`^[a-z0-9][-_a-z0-9]{0,62}$`)

// validate checks every price of pr, its tiers' included, and that each tier
// has a name of its own that is not the standard prices'.
func (pr *Prices) validate(p *field.Path) field.ErrorList {
	errs := pr.classes().validate(p)
	if len(pr.Tiers) > maxTiers {
		errs = append(errs, field.TooMany(p.Child("tiers"), len(pr.Tiers), maxTiers))
	}
	names := map[string]bool{}
	for i := range pr.Tiers {
		tp, t := p.Child("tiers").Index(i), &pr.Tiers[i]
		errs = append(errs, validateTierName(tp.Child("name"), t.Name)...)
		errs = append(errs, validateUnique(tp.Child("name"), t.Name, names)...)
		errs = append(errs, t.classes().validate(tp)...)
	}
	return errs
}

// validate checks each price of c, a price of zero or more.
func (c classPrices) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, m := range c {
		errs = append(errs, validateMoney(p.Child(classFields[k]), *m, false)...)
	}
	return errs
}

// validateTierName refuses a tier's name that is empty, not of tierName's
// form, or one of the standard prices' names.
func validateTierName(p *field.Path, name string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, `must name the tier as the provider's answers do in service_tier, such as "priority" or "flex"`)}
	case isStandardTier(name):
		return field.ErrorList{field.Invalid(p, name, `must not be "auto" or "default": those are the standard prices, set outside tiers`)}
	case !tierName.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, "must be 1 to 63 lower-case letters, digits, '-' and '_', starting with a letter or digit")}
	}
	return nil
}

func (r *Retry) validate(p *field.Path) field.ErrorList {
	errs := validateRange(p.Child("maxAttempts"), int64(r.MaxAttempts), 1, maxRetryAttempts)
	errs = append(errs, validatePositiveDuration(p.Child("baseDelay"), r.BaseDelay)...)
	errs = append(errs, validatePositiveDuration(p.Child("maxDelay"), r.MaxDelay)...)
	if r.MaxDelay.Duration < r.BaseDelay.Duration {
		errs = append(errs, field.Invalid(p.Child("maxDelay"), r.MaxDelay.Duration.String(),
			fmt.Sprintf("must be at least baseDelay (%s)", r.BaseDelay.Duration)))
	}
	return errs
}

// validatePlans checks each plan: a tenant's terms under a unique name,
// without the uid, keys and plan that only a tenant has.
func validatePlans(p *field.Path, plans []Tenant, providers []Provider) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range plans {
		pp, pl := p.Index(i), &plans[i]
		if pl.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		}
		errs = append(errs, validateUnique(pp.Child("name"), pl.Name, names)...)
		if pl.UID != "" {
			errs = append(errs, field.Forbidden(pp.Child("uid"), "a plan has no uid: its tenants do"))
		}
		if len(pl.Keys) > 0 {
			errs = append(errs, field.Forbidden(pp.Child("keys"), "a plan has no keys: its tenants do"))
		}
		if pl.Plan != "" {
			errs = append(errs, field.Forbidden(pp.Child("plan"), "a plan cannot name another plan"))
		}
		errs = append(errs, ValidateTenantTerms(pp, pl, providers)...)
	}
	return errs
}

func planNames(plans []Tenant) map[string]bool {
	names := make(map[string]bool, len(plans))
	for _, pl := range plans {
		names[pl.Name] = true
	}
	return names
}

func validateTenants(p *field.Path, tenants []Tenant, plans map[string]bool, providers []Provider) field.ErrorList {
	var errs field.ErrorList
	names, ids, keys := map[string]bool{}, map[string]bool{}, map[string]*field.Path{}
	for i := range tenants {
		tp := p.Index(i)
		errs = append(errs, validateTenantOrRef(tp, &tenants[i], plans, providers)...)
		errs = append(errs, validateUnique(tp.Child("name"), tenants[i].Name, names)...)
		errs = append(errs, validateUnique(tp.Child("uid"), tenants[i].ID(), ids)...)
		errs = append(errs, validateUniqueKeys(tp.Child("keys"), tenants[i].Keys, keys)...)
	}
	return errs
}

// validateTenantOrRef checks a tenant with terms of its own as
// ValidateTenant does, and one that names a plan by its name, uid and keys,
// its plan among plans, and the absence of terms of its own.
func validateTenantOrRef(p *field.Path, t *Tenant, plans map[string]bool, providers []Provider) field.ErrorList {
	if t.Plan == "" {
		return ValidateTenant(p, t, providers)
	}
	errs := validateIdentity(p, t)
	if !plans[t.Plan] {
		errs = append(errs, field.Invalid(p.Child("plan"), t.Plan, "must name one of plans"))
	}
	if !t.termsZero() {
		errs = append(errs, field.Forbidden(p, "a tenant that names a plan must set no terms of its own (providers, priority, weight, limits, budget, timeZone, maxWait, degrade, jobScope): its plan's apply"))
	}
	return errs
}

// termsZero reports whether the tenant sets none of the fields a plan
// would give it.
func (t *Tenant) termsZero() bool {
	terms := *t
	terms.Name, terms.UID, terms.Keys, terms.Plan = "", "", nil, ""
	return reflect.ValueOf(terms).IsZero()
}

// validateTenantFiles checks that each file is named once, and each hash's
// form.
func validateTenantFiles(p *field.Path, files []TenantFile) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, f := range files {
		fp := p.Index(i)
		if f.Path == "" {
			errs = append(errs, field.Required(fp.Child("path"), ""))
		}
		errs = append(errs, validateUnique(fp.Child("path"), f.Path, seen)...)
		if f.SHA256 != "" && !keyHashPattern.MatchString(f.SHA256) {
			errs = append(errs, field.Invalid(fp.Child("sha256"), f.SHA256, "must be the lower-case hex SHA-256 of the file (64 characters 0-9a-f)"))
		}
	}
	return errs
}

// ValidateTenant checks one defaulted tenant (see Tenant.Default) at path p:
// its name and keys, and its terms (see ValidateTenantTerms) against
// providers, those it may choose from. Names and keys unique across tenants
// are the Config's to check (see Validate).
func ValidateTenant(p *field.Path, t *Tenant, providers []Provider) field.ErrorList {
	errs := validateIdentity(p, t)
	return append(errs, ValidateTenantTerms(p, t, providers)...)
}

// validateIdentity checks a tenant's name, uid and keys.
func validateIdentity(p *field.Path, t *Tenant) field.ErrorList {
	var errs field.ErrorList
	if t.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if t.UID != "" && !uidPattern.MatchString(t.UID) {
		errs = append(errs, field.Invalid(p.Child("uid"), t.UID, "must be at most 128 letters, digits and '-', '_', '.', '/', starting with a letter or digit"))
	}
	return append(errs, validateKeys(p.Child("keys"), t.Keys)...)
}

// ValidateTenantTerms checks what a defaulted tenant may do, at path p:
// every field but its name and keys. Its providers must be among providers,
// and the models its degrade names served by one of its providers. Terms
// that several tenants share, such as the operator's TenantPlan, are checked
// this way before any tenant is named.
func ValidateTenantTerms(p *field.Path, t *Tenant, providers []Provider) field.ErrorList {
	errs := validateTenantProviders(p.Child("providers"), t.Providers, providers)
	errs = append(errs, validateEnum(p.Child("priority"), t.Priority, priorities)...)
	errs = append(errs, validateRange(p.Child("weight"), int64(t.Weight), 1, maxWeight)...)
	errs = append(errs, validateLimits(p.Child("perUser"), t.PerUser)...)
	errs = append(errs, validateLimits(p.Child("perTenant"), t.PerTenant)...)
	errs = append(errs, validateEndpoints(p.Child("endpoints"), t.Endpoints)...)
	errs = append(errs, validateBudget(p.Child("budget"), t.Budget)...)
	errs = append(errs, validateTimeZone(p.Child("timeZone"), t.TimeZone)...)
	errs = append(errs, validateMaxWait(p.Child("maxWait"), t.MaxWait)...)
	errs = append(errs, validateEnum(p.Child("jobScope"), t.JobScope, jobScopes)...)
	errs = append(errs, validateEnum(p.Child("providerState"), t.ProviderState, providerStates)...)
	errs = append(errs, validatePromptIDs(p.Child("storedPrompts"), t.StoredPrompts)...)
	return append(errs, validateDegrade(p, t, providers)...)
}

// validateKeys checks each key's form. It never quotes a hash: a person may
// have pasted the key itself where its hash belongs.
func validateKeys(p *field.Path, keys []Key) field.ErrorList {
	if len(keys) == 0 {
		return field.ErrorList{field.Required(p, "at least one key")}
	}
	var errs field.ErrorList
	for i, k := range keys {
		if !keyHashPattern.MatchString(k.SHA256) {
			errs = append(errs, field.Invalid(p.Index(i).Child("sha256"), field.OmitValueType{},
				"must be the lower-case hex SHA-256 of the key (64 characters 0-9a-f); the value is not shown"))
		}
		if k.User == "" {
			errs = append(errs, field.Required(p.Index(i).Child("user"), ""))
		}
	}
	return errs
}

// validateUniqueKeys refuses a hash that an earlier key has, naming the
// earlier key by its path only.
func validateUniqueKeys(p *field.Path, keys []Key, seen map[string]*field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, k := range keys {
		kp := p.Index(i).Child("sha256")
		if first, ok := seen[k.SHA256]; ok {
			errs = append(errs, field.Invalid(kp, field.OmitValueType{}, fmt.Sprintf("must be unique, but equals %s", first)))
			continue
		}
		seen[k.SHA256] = kp
	}
	return errs
}

func validateTenantProviders(p *field.Path, names []string, providers []Provider) field.ErrorList {
	if len(names) == 0 {
		return field.ErrorList{field.Required(p, "at least one provider")}
	}
	var errs field.ErrorList
	known := providerNames(providers)
	seen := map[string]bool{}
	for i, name := range names {
		if !slices.Contains(known, name) {
			errs = append(errs, field.NotSupported(p.Index(i), name, known))
		}
		errs = append(errs, validateUnique(p.Index(i), name, seen)...)
	}
	return errs
}

func providerNames(providers []Provider) []string {
	names := make([]string, 0, len(providers))
	for _, pr := range providers {
		names = append(names, pr.Name)
	}
	return names
}

func validateEndpoints(p *field.Path, eps []EndpointLimits) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, ep := range eps {
		ip := p.Index(i)
		errs = append(errs, validateEnum(ip.Child("endpoint"), ep.Endpoint, endpoints)...)
		errs = append(errs, validateUnique(ip.Child("endpoint"), string(ep.Endpoint), seen)...)
		if len(ep.Limits) == 0 {
			errs = append(errs, field.Required(ip.Child("limits"), "at least one limit"))
		}
		errs = append(errs, validateLimits(ip.Child("limits"), ep.Limits)...)
	}
	return errs
}

func validateLimits(p *field.Path, limits []Limit) field.ErrorList {
	var errs field.ErrorList
	for i := range limits {
		errs = append(errs, limits[i].validate(p.Index(i))...)
	}
	return errs
}

// validateGlobal checks the global limits, which count no calls in flight:
// every tenant would take from one count, and one tenant could fill it.
func validateGlobal(p *field.Path, limits []Limit) field.ErrorList {
	errs := validateLimits(p, limits)
	for i, l := range limits {
		if l.Dimension == DimensionInFlight {
			errs = append(errs, field.Invalid(p.Index(i).Child("dimension"), l.Dimension,
				"must not be inFlight in global: cap calls at once with a provider's maxInFlight, or a plan's perUser, perTenant or endpoints limits"))
		}
	}
	return errs
}

func (l *Limit) validate(p *field.Path) field.ErrorList {
	errs := validateEnum(p.Child("dimension"), l.Dimension, dimensions)
	if l.Dimension == DimensionInFlight {
		return append(errs, l.validateInFlight(p)...)
	}
	errs = append(errs, validateEnum(p.Child("per"), l.Per, periods)...)
	errs = append(errs, l.validateAmount(p)...)
	errs = append(errs, l.validateBurst(p.Child("burst"))...)
	errs = append(errs, l.validateRate(p.Child("per"))...)
	errs = append(errs, validateEnum(p.Child("onLimit"), l.OnLimit, behaviors)...)
	if l.Per.IsCalendar() && l.OnLimit == BehaviorQueue {
		errs = append(errs, field.Invalid(p.Child("onLimit"), l.OnLimit,
			"must be Reject on a calendar window: waiting until midnight is not a queue"))
	}
	return errs
}

// validateInFlight checks a limit on calls in flight: an amount of calls at
// once, with no period, burst or dollars.
func (l *Limit) validateInFlight(p *field.Path) field.ErrorList {
	errs := validatePositive(p.Child("amount"), l.Amount)
	if l.Per != "" {
		errs = append(errs, field.Invalid(p.Child("per"), l.Per, "must be empty for inFlight, which counts calls at once, not per period"))
	}
	if l.Burst != 0 {
		errs = append(errs, field.Invalid(p.Child("burst"), l.Burst, "must be 0 for inFlight, which has no bucket"))
	}
	if l.Dollars != "" {
		errs = append(errs, field.Invalid(p.Child("dollars"), l.Dollars, "must be empty for inFlight; set amount, the calls at once"))
	}
	return append(errs, validateEnum(p.Child("onLimit"), l.OnLimit, behaviors)...)
}

// validateAmount checks that requests and tokens are counted in amount and
// dollars in dollars, never both.
func (l *Limit) validateAmount(p *field.Path) field.ErrorList {
	switch l.Dimension {
	case DimensionDollars:
		errs := validateMoney(p.Child("dollars"), l.Dollars, true)
		if l.Amount != 0 {
			errs = append(errs, field.Invalid(p.Child("amount"), l.Amount, "must be 0 for dollars; set dollars instead"))
		}
		return errs
	case DimensionRequests, DimensionTokens, DimensionInputTokens, DimensionOutputTokens:
		errs := validatePositive(p.Child("amount"), l.Amount)
		if l.Dollars != "" {
			errs = append(errs, field.Invalid(p.Child("dollars"), l.Dollars, fmt.Sprintf("must be empty for %s; set amount instead", l.Dimension)))
		}
		return errs
	}
	return nil
}

func (l *Limit) validateBurst(p *field.Path) field.ErrorList {
	switch {
	case l.Burst == 0:
		return nil
	case l.Per.IsCalendar():
		return field.ErrorList{field.Invalid(p, l.Burst, "must be 0 on a calendar window, which has no bucket")}
	case l.Dimension == DimensionDollars:
		return field.ErrorList{field.Invalid(p, l.Burst, "must be 0 for dollars: the bucket holds the dollars amount")}
	}
	return validatePositive(p, l.Burst)
}

func validateBudget(p *field.Path, b *Budget) field.ErrorList {
	if b == nil {
		return nil
	}
	errs := validateMoney(p.Child("amount"), b.Amount, true)
	return append(errs, validateEnum(p.Child("period"), b.Period, calendarPeriods)...)
}

func validateTimeZone(p *field.Path, tz string) field.ErrorList {
	const want = `must be an IANA time zone such as "Europe/Berlin"`
	if tz == "Local" { // the machine's zone: two gateways could disagree
		return field.ErrorList{field.Invalid(p, tz, want)}
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return field.ErrorList{field.Invalid(p, tz, want)}
	}
	return nil
}

func validateMaxWait(p *field.Path, d metav1.Duration) field.ErrorList {
	if d.Duration <= 0 || d.Duration > maxMaxWait {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), fmt.Sprintf("must be more than 0s and at most %s", maxMaxWait))}
	}
	return nil
}

// validateDegrade checks that both models are ones the tenant may use, so
// that degrading never sends a request where the tenant may not go.
func validateDegrade(p *field.Path, t *Tenant, providers []Provider) field.ErrorList {
	d := t.Degrade
	if d == nil {
		return nil
	}
	var errs field.ErrorList
	if t.Budget == nil {
		errs = append(errs, field.Required(p.Child("budget"), "required when degrade is set"))
	}
	dp := p.Child("degrade")
	errs = append(errs, validateTenantModel(dp.Child("model"), d.Model, t, providers)...)
	errs = append(errs, validateTenantModel(dp.Child("fallback"), d.Fallback, t, providers)...)
	if d.Model != "" && d.Fallback == d.Model {
		errs = append(errs, field.Invalid(dp.Child("fallback"), d.Fallback, "must differ from model"))
	}
	return append(errs, validateRange(dp.Child("belowPercent"), int64(d.BelowPercent), 1, 99)...)
}

func validateTenantModel(p *field.Path, model string, t *Tenant, providers []Provider) field.ErrorList {
	if model == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, pr := range providersOfModel(providers, model) {
		if slices.Contains(t.Providers, pr.Name) {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(p, model, "must be a model of one of the tenant's providers")}
}

// validateUnique refuses a name seen before; an empty name is left to the
// field's own check.
func validateUnique(p *field.Path, name string, seen map[string]bool) field.ErrorList {
	if name == "" {
		return nil
	}
	if seen[name] {
		return field.ErrorList{field.Duplicate(p, name)}
	}
	seen[name] = true
	return nil
}

// validateEnum refuses a value outside valid, or an empty one.
func validateEnum[T ~string](p *field.Path, v T, valid []T) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, fmt.Sprintf("must be one of %q", valid))}
	}
	for _, ok := range valid {
		if v == ok {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, valid)}
}

func validateMoney(p *field.Path, m Money, positive bool) field.ErrorList {
	if m == "" && !positive {
		return nil
	}
	n, err := m.MicroDollars()
	switch {
	case m == "":
		return field.ErrorList{field.Required(p, `must be a dollar amount more than 0, such as "5.00"`)}
	case !moneyPattern.MatchString(string(m)):
		return field.ErrorList{field.Invalid(p, string(m), `must be a decimal dollar amount such as "0.50", with at most 6 decimals`)}
	case err != nil:
		return field.ErrorList{field.Invalid(p, string(m), "must be at most 9223372036854.775807")}
	case positive && n == 0:
		return field.ErrorList{field.Invalid(p, string(m), "must be more than 0")}
	}
	return nil
}

func validatePositive(p *field.Path, v int64) field.ErrorList {
	if v <= 0 {
		return field.ErrorList{field.Invalid(p, v, "must be more than 0")}
	}
	return nil
}

func validateNonNegative(p *field.Path, v int64) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(p, v, "must be 0 or more")}
	}
	return nil
}

func validateRange(p *field.Path, v, lo, hi int64) field.ErrorList {
	if v < lo || v > hi {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be from %d to %d", lo, hi))}
	}
	return nil
}

func validateMinDuration(p *field.Path, d metav1.Duration, least time.Duration) field.ErrorList {
	if d.Duration < least {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), fmt.Sprintf("must be at least %s", least))}
	}
	return nil
}

func validatePositiveDuration(p *field.Path, d metav1.Duration) field.ErrorList {
	if d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be more than 0s")}
	}
	return nil
}

// validatePromptIDs checks that each stored prompt is named by its id, pmpt_ and letters or
// digits, once.
func validatePromptIDs(p *field.Path, ids []string) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		switch {
		case !promptID.MatchString(id):
			errs = append(errs, field.Invalid(p.Index(i), id, "must be a stored prompt's id: pmpt_ followed by letters and digits"))
		case seen[id]:
			errs = append(errs, field.Duplicate(p.Index(i), id))
		}
		seen[id] = true
	}
	return errs
}

// promptID is the form of a stored prompt's id.
var promptID = regexp.MustCompile(`^pmpt_[A-Za-z0-9]{1,128}$`)
