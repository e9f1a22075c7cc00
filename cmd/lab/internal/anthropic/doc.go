// Package anthropic is the part of Anthropic's Messages API that the lab's
// simulated provider speaks: it reads Messages and count_tokens requests,
// counts their prompts and finds their cache breakpoints, plans the
// model's answer, and writes it as a Message object or its stream of
// events, and writes the models and errors in Anthropic's shapes.
//
// # Prompts
//
// A prompt is read in the order Anthropic's cache reads it: the tools,
// then the system prompt, then each message's content, each tool, system
// block and content block a block of its own (a string of content or of
// system is one text block). Its tokens are counted as package openai
// counts a prompt, ceil(UTF-8 bytes / 4), over the text of its blocks
// joined:
//
//   - a tool: its JSON, without its cache_control;
//   - text: its text; thinking: its thinking; redacted_thinking: its data;
//   - tool_use: its name and its input as JSON; tool_result: the text of
//     its content;
//   - a document with a text or content source: its text;
//   - any other block: its JSON, without its cache_control;
//
// and to those, fixed tokens for what the proxy cannot read: an image of
// base64 GIF, JPEG, PNG or WebP data is width × height / 750 tokens, rounded
// up, once its longest edge is scaled down to 1,568 pixels, and at most
// [ImageTokens], which any other image is; a document of a PDF, a URL or a
// file is the tokens the simulator says (documentTokens).
//
// A block whose cache_control is {"type": "ephemeral"} (with "ttl": "1h",
// an hour, else five minutes) is a breakpoint; a request's own
// cache_control makes its last block one. [Prompt] says where each block
// ends, in tokens, and identifies the prompt up to there, so that a
// simulator can find what it has cached. A request may have at most
// [MaxBreakpoints] and none of an hour after one of five minutes.
//
// # Answers
//
// The model thinks first if the request enables thinking, within its
// budget_tokens (which must be at least 1,024 and below max_tokens; an
// adaptive one may use all but one of max_tokens). Then it calls a tool,
// if the request has custom tools (tools without a type of their own) and
// tool_choice is "tool" (the tool it names) or "any" (the first), or is
// "auto" or absent and the last message is the user's and its text holds
// a tool's name (the first such tool); "none" calls none. The call's
// input holds each property the tool's input_schema requires: "lab" for a
// string, 1 for a number, true for a boolean, an empty array or object.
// A call whose input does not fit in what max_tokens leaves, and any
// other answer, is filler text, up to max_tokens (stop_reason
// "max_tokens") or shorter (end_turn), cut before the first stop
// sequence it holds (stop_sequence). The answer's output tokens are its
// thinking and its text, or its call's input as JSON, by the proxy.
//
// A stream sends message_start (its usage counts the input and one output
// token), then each block's content_block_start (a ping after the first),
// its deltas of up to 16 tokens (thinking_delta and a signature_delta,
// text_delta, or input_json_delta), content_block_stop, then message_delta
// (the stop reason, and the whole usage) and message_stop, each as
// "event: NAME" and "data: JSON".
//
// The simulator ignores temperature, metadata and the other sampling
// parameters, and serves every call at the standard tier.
package anthropic
