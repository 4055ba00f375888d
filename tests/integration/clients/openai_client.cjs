// Drives mmserve with the official `openai` npm package (installed by scripts/test.sh into
// .deps/node) and prints what it saw as one JSON line. Usage: node openai_client.cjs PORT
const { OpenAI } = require('openai');

async function main() {
  const port = process.argv[2];
  const client = new OpenAI({
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: process.argv[3] || 'unused',
    maxRetries: 0,
    timeout: 60000,
  });
  const out = {};
  const messages = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Name a colour.' },
  ];
  out.chat = await client.chat.completions.create({
    model: 'llm', messages, max_tokens: 12, temperature: 0,
  });

  const stream = await client.chat.completions.create({
    model: 'llm', messages, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  const streamed = { text: '', chunks: 0, roles: [], finish: null, usage: null };
  for await (const chunk of stream) {
    streamed.chunks++;
    if (chunk.usage) streamed.usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.role) streamed.roles.push(choice.delta.role);
    streamed.text += choice.delta.content || '';
    if (choice.finish_reason) streamed.finish = choice.finish_reason;
  }
  out.stream = streamed;

  out.completion = await client.completions.create({
    model: 'llm', prompt: 'Once upon a time', max_tokens: 8, temperature: 0,
  });
  const completionStream = await client.completions.create({
    model: 'llm', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true,
  });
  out.completion_stream = '';
  for await (const chunk of completionStream) out.completion_stream += chunk.choices[0]?.text || '';

  // The SDK asks for base64 unless told otherwise and decodes it itself.
  const embeddings = await client.embeddings.create({
    model: 'embedder', input: ['hello world', 'a second text'],
  });
  out.embeddings = {
    count: embeddings.data.length,
    dims: embeddings.data[0].embedding.length,
    indexes: embeddings.data.map((d) => d.index),
    first: embeddings.data[0].embedding.slice(0, 8),
    usage: embeddings.usage,
  };
  const floats = await client.embeddings.create({
    model: 'embedder', input: 'hello world', encoding_format: 'float',
  });
  out.embedding_float_first = floats.data[0].embedding.slice(0, 8);

  out.models = (await client.models.list()).data.map((m) => ({ id: m.id, task: m.task }));

  try {
    await client.chat.completions.create({ model: 'no-such-model', messages });
    out.error = null;
  } catch (e) {
    out.error = { status: e.status, message: e.message, type: e.type, param: e.param };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
