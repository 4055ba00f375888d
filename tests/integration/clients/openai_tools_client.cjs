// Tool calls read by the official `openai` npm package (installed by scripts/test.sh into
// .deps/node): tool_choice required (one call, then parallel calls allowed), the named form
// streamed and not. Prints what it saw as one JSON line. Usage: node openai_tools_client.cjs PORT
const { OpenAI } = require('openai');

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone',
    parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 8 } },
      required: ['zone'], additionalProperties: false } } },
];

function calls(message) {
  return (message.tool_calls || []).map((c) => {
    let parses = true;
    try { JSON.parse(c.function.arguments); } catch (e) { parses = false; }
    return { id: c.id, name: c.function.name, arguments: c.function.arguments, arguments_parse: parses };
  });
}

async function main() {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${process.argv[2]}/v1`, apiKey: 'unused',
                              maxRetries: 0, timeout: 120000 });
  const base = { model: 'qwen2', messages: [{ role: 'user', content: 'Weather in Paris, and the time?' }],
                 tools, max_tokens: 400, temperature: 0 };
  const out = {};
  const single = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: false });
  out.single = { calls: calls(single.choices[0].message), finish: single.choices[0].finish_reason };
  const parallel = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: true });
  out.parallel = { calls: calls(parallel.choices[0].message), finish: parallel.choices[0].finish_reason };
  const named = { type: 'function', function: { name: 'get_time' } };
  const whole = await client.chat.completions.create({ ...base, tool_choice: named, parallel_tool_calls: false });
  out.named = calls(whole.choices[0].message)[0];
  const stream = await client.chat.completions.create({ ...base, tool_choice: named, parallel_tool_calls: false,
                                                        stream: true });
  const seen = { name: '', arguments: '', finish: null };
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.finish_reason) seen.finish = choice.finish_reason;
    for (const d of choice.delta.tool_calls || []) {
      seen.name += d.function?.name || '';
      seen.arguments += d.function?.arguments || '';
    }
  }
  out.stream = seen;
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
