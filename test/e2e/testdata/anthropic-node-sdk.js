// Runs the official @anthropic-ai/sdk npm package through two gateways and prints what it saw as
// JSON: node anthropic-node-sdk.js BASE_URL_A BASE_URL_B KEY DAILY_KEY
const Anthropic = require('@anthropic-ai/sdk');

const model = 'claude-sonnet-5-5';
const says = (text) => [{ role: 'user', content: text }];

async function main() {
  const [urlA, urlB, apiKey, dailyKey] = process.argv.slice(2);
  const out = {};
  const a = new Anthropic({ baseURL: urlA, apiKey, maxRetries: 0 });
  const b = new Anthropic({ baseURL: urlB, apiKey, maxRetries: 0 });

  const { data: message, response } = await a.messages.create({ model, max_tokens: 100, messages: says('Say hello.') }).withResponse();
  out.message = {
    text: message.content[0].text, input: message.usage.input_tokens, output: message.usage.output_tokens,
    stopReason: message.stop_reason, requestIDFromHeader: response.headers.get('request-id') === message._request_id,
  };

  const events = [];
  const stream = b.messages.stream({ model, max_tokens: 100, messages: says('Say hello.') });
  stream.on('streamEvent', (event) => events.push(event.type));
  const streamed = await stream.finalMessage();
  out.stream = { text: streamed.content[0].text, output: streamed.usage.output_tokens, events: events.filter((e) => e !== 'ping') };

  const count = await a.messages.countTokens({ model, messages: says('Say hello.') });
  out.count = { input: count.input_tokens };

  const tools = [{
    name: 'get_weather', description: 'The weather in a city.',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  }];
  const question = says('What is the weather in Paris? Use get_weather.');
  const call = await b.messages.create({ model, max_tokens: 100, tools, messages: question });
  const use = call.content.find((block) => block.type === 'tool_use');
  const answer = await a.messages.create({
    model, max_tokens: 100, tools,
    messages: [...question, { role: 'assistant', content: call.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 C.' }] }],
  });
  out.tool = { name: use.name, stopReason: call.stop_reason, answerStopReason: answer.stop_reason };

  const system = [{ type: 'text', text: 'page'.repeat(1250), cache_control: { type: 'ephemeral' } }];
  const cached = { written: 0, read: 0 };
  for (const client of [a, b]) {
    const m = await client.messages.create({ model, max_tokens: 100, system, messages: says('Summarise this page.') });
    cached.written += m.usage.cache_creation_input_tokens;
    cached.read += m.usage.cache_read_input_tokens;
  }
  out.cache = cached;

  try {
    await b.messages.create({ model: 'claude-nonesuch', max_tokens: 10, messages: says('Say hello.') });
    out.unknown = { status: 200 };
  } catch (err) {
    out.unknown = { status: err.status, type: err.error?.error?.type, name: err.constructor.name, requestID: err.requestID };
  }

  // A day's quota of one request: the second call is refused until midnight, which the SDK,
  // retrying twice, must not wait for.
  const statuses = [];
  const daily = new Anthropic({
    baseURL: urlA, apiKey: dailyKey, maxRetries: 2,
    fetch: async (url, init) => { const res = await fetch(url, init); statuses.push(res.status); return res; },
  });
  await daily.messages.create({ model, max_tokens: 10, messages: says('Say hello.') });
  try {
    await daily.messages.create({ model, max_tokens: 10, messages: says('Say hello.') });
    out.spent = { status: 200 };
  } catch (err) {
    out.spent = { status: err.status, type: err.error?.error?.type, name: err.constructor.name, requestID: err.requestID };
  }
  out.spentAnswers = statuses;

  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });
