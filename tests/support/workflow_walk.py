"""A Standard state machine's definition walked by the JSONata engine the repository pins (the npm ``jsonata``
package, with Step Functions' own functions: :data:`~tests.support.jsonata.STEP_FUNCTIONS_JSONATA`): each state's
JSONata fields evaluated, its tasks' arguments recorded and their results given by the test. Only what the workflows
use: Pass, Wait (not waited), Choice, Task with Catch, Succeed and Fail."""

from __future__ import annotations

from typing import Any, Dict, List

from tests.support.jsonata import STEP_FUNCTIONS_JSONATA, run_node

WALKER = r"""
async function render(t, b) {
  if (typeof t === 'string') {
    const m = t.match(/^\{%([\s\S]*)%\}$/);
    return m ? await expression(m[1]).evaluate({}, b) : t;
  }
  if (Array.isArray(t)) { const r = []; for (const x of t) r.push(await render(x, b)); return r; }
  if (t && typeof t === 'object') {
    const r = {};
    for (const [k, v] of Object.entries(t)) { const x = await render(v, b); if (x !== undefined) r[k] = x; }
    return r;
  }
  return t;
}
async function walk(c) {
  const def = c.definition; const results = c.results || {}; const calls = [];
  let vars = {}; let input = c.input; let name = def.StartAt; const steps = [];
  for (let i = 0; i < 20000; i++) {
    const s = def.States[name]; steps.push(name);
    const b = Object.assign({}, vars, {states: {input: input, context: c.context}});
    if (s.Type === 'Pass') { vars = Object.assign({}, vars, await render(s.Assign || {}, b)); name = s.Next; continue; }
    if (s.Type === 'Wait') { name = s.Next; continue; }
    if (s.Type === 'Choice') {
      let next = s.Default;
      for (const choice of s.Choices) { if (await render(choice.Condition, b)) { next = choice.Next; break; } }
      name = next; continue;
    }
    if (s.Type === 'Fail') {
      return {steps, calls, vars, end: 'Fail', error: await render(s.Error, b), cause: await render(s.Cause, b)};
    }
    if (s.Type === 'Succeed') {
      return {steps, calls, vars, end: 'Succeed', output: s.Output ? await render(s.Output, b) : input};
    }
    if (s.Type === 'Task') {
      const args = await render(s.Arguments, b); calls.push({state: name, arguments: args});
      const queue = results[name] || [];
      if (!queue.length) return {steps, calls, vars, end: 'Task', state: name};
      const result = queue.length > 1 ? queue.shift() : queue[0];
      if (result.Error) {
        const handler = (s.Catch || []).find(
          h => h.ErrorEquals.includes(result.Error) || h.ErrorEquals.includes('States.ALL'));
        input = {Error: result.Error, Cause: result.Cause}; name = handler.Next; continue;
      }
      const rb = Object.assign({}, b, {states: {input: input, context: c.context, result: result}});
      vars = Object.assign({}, vars, await render(s.Assign || {}, rb));
      input = s.Output ? await render(s.Output, rb) : result;
      if (s.End) return {steps, calls, vars, end: 'End', output: input};
      name = s.Next; continue;
    }
    throw new Error('state type ' + s.Type);
  }
  throw new Error('no end after 20000 states');
}
let text = '';
process.stdin.on('data', d => text += d);
process.stdin.on('end', async () => {
  const out = [];
  for (const c of JSON.parse(text)) {
    try { out.push(await walk(c)); } catch (e) { out.push({end: 'Error', message: e.message}); }
  }
  process.stdout.write(JSON.stringify(out));
});
"""


def walk(definition: Dict[str, Any], *requests: Dict[str, Any], **options: Any) -> List[Dict[str, Any]]:
    """Each request's path through ``definition`` in an execution named ``execution``: the states it passed, the
    tasks it called (with their evaluated arguments) and how it ended. ``results`` gives each task's results in turn
    (the last one repeats)."""
    name = options["execution"]
    context = {"Execution": {"Name": name, "Id": execution_arn(name), "StartTime": "2026-12-01T10:00:00.000Z"}}
    cases = [
        {"definition": definition, "input": request, "context": context, "results": options.get("results", {})}
        for request in requests
    ]
    return run_node(STEP_FUNCTIONS_JSONATA + WALKER, cases)


def execution_arn(name: str) -> str:
    """The ARN of the execution named ``name`` (the context object's ``Execution.Id``)."""
    return f"arn:aws:states:us-west-2:123456789012:execution:Workflow:{name}"
