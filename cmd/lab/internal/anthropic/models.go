package anthropic

import (
	"net/http"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// modelInfo is a model as GET /v1/models shows it. The simulator knows
// neither when a model was released, so it says the Unix epoch as
// Anthropic does for a date it does not know, nor its limits and
// capabilities, which it leaves null.
type modelInfo struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	DisplayName    string    `json:"display_name"`
	CreatedAt      string    `json:"created_at"`
	Lifecycle      string    `json:"lifecycle"`
	Capabilities   *struct{} `json:"capabilities"`
	DeprecatedAt   *string   `json:"deprecated_at"`
	RetiresAt      *string   `json:"retires_at"`
	Line           *string   `json:"line"`
	MaxInputTokens *int64    `json:"max_input_tokens"`
	MaxTokens      *int64    `json:"max_tokens"`
}

func infoOf(id string) modelInfo {
	return modelInfo{ID: id, Type: "model", DisplayName: id, CreatedAt: "1970-01-01T00:00:00Z", Lifecycle: "active"}
}

// WriteModels answers GET /v1/models with models, in one page.
func WriteModels(w http.ResponseWriter, models []string) {
	page := struct {
		Data    []modelInfo `json:"data"`
		HasMore bool        `json:"has_more"`
		FirstID *string     `json:"first_id"`
		LastID  *string     `json:"last_id"`
	}{Data: []modelInfo{}}
	for _, m := range models {
		page.Data = append(page.Data, infoOf(m))
	}
	if n := len(models); n > 0 {
		page.FirstID, page.LastID = &models[0], &models[n-1]
	}
	openai.WriteJSON(w, http.StatusOK, page)
}

// WriteModel answers GET /v1/models/{id} with the model id.
func WriteModel(w http.ResponseWriter, id string) { openai.WriteJSON(w, http.StatusOK, infoOf(id)) }
