// Package openai is the part of OpenAI's HTTP API that the lab's simulators
// speak: it reads chat, completion, embedding and Responses requests, counts
// their tokens, and writes answers as JSON or as server-sent events (a
// Response object and its events for the Responses API), and errors in
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
// message contents of a chat (the text parts of an array content; its
// input_audio parts are counted apart, [Request.AudioParts]), over each
// prompt of a completion and each input of an embedding, one token per id
// where a prompt or input is given as token ids. A Responses request counts
// its instructions, its tools as JSON and its input items, in that order,
// joined: the text of a message, the name and arguments of a function call,
// the output of a function call's output, nothing of an item_reference, and
// the JSON of an item of another shape. The files it names and the searches
// its tools make are counted apart ([ResponsesRequest]), for the simulator
// to bill. A chat and a Responses request keep the text they count, in
// order ([Request.PromptText], [ResponsesRequest.Text]), so that a
// simulator can tell the prefixes of prompts apart, and the service tier
// they ask for.
//
// Completion tokens are max_completion_tokens (max_output_tokens for a
// response), else max_tokens, else the server's default, and [NewReply]
// answers exactly that many tokens of filler text (see [Filler]), so the
// proxy counts the text of a streamed answer back to its usage. A
// simulator whose model reasons or speaks writes less text than its usage
// counts, and says how much less in the usage's details ([Usage]).
//
// The simulators ignore n (they always answer one choice), the tools of a
// chat, and every sampling parameter, which a Response object repeats.
package openai
