// Package openai is the part of OpenAI's HTTP API that the lab's simulators
// speak: it reads chat, completion and embedding requests, counts their
// tokens, and writes answers as JSON or as server-sent events, and errors in
// OpenAI's error body. It also writes the request the lab's loads send, a
// chat completion ([ChatBody]).
//
// # Tokens
//
// Prompt tokens are counted with the proxy
//
//	ceil(UTF-8 bytes / 4)
//
// (OpenAI's rule of thumb of about four characters a token): over the joined
// message contents of a chat (the text parts of an array content), over each
// prompt of a completion and each input of an embedding, one token per id
// where a prompt or input is given as token ids. Completion tokens are
// max_completion_tokens, else max_tokens, else the server's default, and the
// answer is exactly that many tokens of filler text (see [Filler]), so the
// proxy counts the text of a streamed answer back to its usage.
//
// The simulators ignore n (they always answer one choice), tools, and every
// sampling parameter.
package openai
