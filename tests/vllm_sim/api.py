# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenAI-compatible HTTP API of the simulator (a stand-in for vLLM, test code only)."""


import hashlib
import json
import secrets
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vllm_sim import engine as eng
from vllm_sim import logs

GUARDED_PREFIX = ('/v1', '/v2', '/inference', '/cohere')
# What vLLM 0.26.0 answered after an engine death: HTTP 500 with this body, or, on a stream that had started,
# this error as an in-band event (HTTP status still 200) then [DONE] (real-vllm-on-device notes, Part 1 §3).
ENGINE_DEAD_MESSAGE = 'EngineCore encountered an issue. See stack trace (above) for the root cause.'
ENGINE_DEAD_ERROR = {'error': {'message': ENGINE_DEAD_MESSAGE, 'type': 'InternalServerError', 'param': None, 'code': 500}}


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def make_server(host, port, handler_cls):
    """Bind now (port reserved, connections refused), listen later with server.server_activate()."""
    server = SimHTTPServer((host or '0.0.0.0', port), handler_cls, bind_and_activate=False)
    server.server_bind()
    return server


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'
        server_version = 'uvicorn'
        sys_version = ''
        _body = b''

        def log_message(self, format, *args):  # pylint: disable=redefined-builtin
            return

        def _access(self, code):
            if not state.cfg.disable_access_log:
                try:
                    phrase = self.responses.get(code, ('',))[0]
                except (AttributeError, IndexError):
                    phrase = ''
                logs.uvicorn('%s:%d - "%s %s HTTP/1.1" %d %s' % (self.client_address[0], self.client_address[1],
                                                                 self.command, self.path, code, phrase))

        def _send(self, code, body=b'', ctype='application/json'):
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            elif isinstance(body, str):
                body = body.encode()
            self.send_response(code)
            if body or ctype != 'application/json':
                self.send_header('content-type', ctype)
            self.send_header('content-length', str(len(body)))
            self.end_headers()
            if body and self.command != 'HEAD':
                self.wfile.write(body)
            self._access(code)

        def _error(self, code, message, etype='BadRequestError'):
            self._send(code, {'error': {'message': message, 'type': etype, 'param': None, 'code': code}})

        def _param_error(self, message, param, value):
            """vLLM 0.26's 400 for a bad request parameter: the parameter named in the message and in `param`."""
            self._send(400, {'error': {'message': '%s (parameter=%s, value=%s)' % (message, param, value),
                                       'type': 'BadRequestError', 'param': param, 'code': 400}})

        def _authorized(self):
            path = self.path.split('?', 1)[0]
            if not state.api_keys or self.command == 'OPTIONS' or not path.startswith(GUARDED_PREFIX):
                return True
            header = self.headers.get('Authorization', '')
            given = hashlib.sha256(header.encode()).digest()
            return any(secrets.compare_digest(given, hashlib.sha256(('Bearer ' + k).encode()).digest())
                       for k in state.api_keys)

        def _read_body(self):
            try:
                length = int(self.headers.get('content-length') or 0)
            except ValueError:
                length = 0
            self._body = self.rfile.read(length) if length > 0 else b''

        def _read_json(self):
            raw = getattr(self, '_body', b'')
            try:
                data = json.loads(raw.decode() or '{}')
            except ValueError:
                return None
            return data if isinstance(data, dict) else None

        # ---------------------------------------------------------------- routing
        def do_GET(self):  # pylint: disable=invalid-name
            self._route()

        def do_POST(self):  # pylint: disable=invalid-name
            self._route()

        def do_HEAD(self):  # pylint: disable=invalid-name
            self._route()

        def do_OPTIONS(self):  # pylint: disable=invalid-name
            self._read_body()
            self._send(200, b'', 'text/plain')

        def _route(self):
            path = self.path.split('?', 1)[0]
            self._read_body()
            if not self._authorized():
                self._send(401, {'error': 'Unauthorized'})
                return
            get = self.command in ('GET', 'HEAD')
            if path in ('/health', '/ping') and (get or path == '/ping'):
                # 200 until the process exits, even after an engine death: real vLLM 0.26.0 never answered 503
                # (tests/fixtures/real_vllm/worker_killed_*.json; real-vllm-on-device notes, Part 1 §1, §3)
                self._send(200, b'')
            elif path == '/version' and get:
                self._send(200, {'version': state.version})
            elif path == '/load' and get:
                self._send(200, {'server_load': state.engine.load()})
            elif path == '/sim/wedge' and self.command == 'POST':
                # test control (not a vLLM endpoint): wedge the engine now or after N more generated tokens
                body = self._read_json() or {}
                after = body.get('after_tokens', 0)
                if not isinstance(after, int) or isinstance(after, bool) or after < 0:
                    self._error(400, 'after_tokens must be an integer >= 0')
                    return
                state.engine.wedge(after)
                self._send(200, {'wedged': state.engine.wedged.is_set(), 'wedge_at_tokens': state.engine.wedge_at_tokens,
                                 'generation_tokens': state.engine.generation_tokens})
            elif path == '/sim/clock' and get:
                # test control (not a vLLM endpoint): how much time the step clock dropped after host stalls
                self._send(200, state.engine.clock_report())
            elif path == '/sim/garble' and self.command == 'POST':
                # test control (not a vLLM endpoint): garble every later reply (null: clean again) while /health stays
                # 200 and the counters keep moving: output that decays with uptime (field notes). A tool-call request
                # gets the garbled text and no tool call (_plan).
                body = self._read_json()
                mode = (body or {}).get('mode', '')
                if body is None or 'mode' not in body or (mode is not None and mode not in eng.GARBLE_MODES):
                    got = 'no JSON object' if body is None else json.dumps(mode) if 'mode' in body else 'no "mode"'
                    self._error(400, '"mode" must be one of %s or null (clean replies), got %s: send e.g. '
                                     '{"mode": "cjk"}' % (', '.join(eng.GARBLE_MODES), got))
                    return
                state.garble = mode
                self._send(200, {'garble': mode})
            elif path == '/metrics' and get:
                self._send(200, state.engine.render_metrics(), 'text/plain; version=0.0.4; charset=utf-8')
            elif path == '/v1/models' and get:
                self._send(200, state.models_body())
            elif path == '/v1/chat/completions' and self.command == 'POST':
                self._completion(chat=True)
            elif path == '/v1/completions' and self.command == 'POST':
                self._completion(chat=False)
            elif path in ('/tokenize',) and self.command == 'POST':
                body = self._read_json() or {}
                text = body.get('prompt') or json.dumps(body.get('messages') or '')
                n = eng.count_prompt_tokens(text)
                self._send(200, {'count': n, 'max_model_len': state.cfg.max_model_len, 'tokens': list(range(n))})
            else:
                self._send(404, {'detail': 'Not Found'})

        # ---------------------------------------------------------------- generation
        def _completion(self, chat):
            body = self._read_json()
            if body is None:
                self._error(400, 'Invalid JSON body')
                return
            model = body.get('model')
            if model is not None and model not in state.cfg.served_names:
                self._error(404, 'The model `%s` does not exist.' % model, 'NotFoundError')
                return
            if state.engine.errored:
                self._send(500, ENGINE_DEAD_ERROR)
                return
            if chat:
                messages = body.get('messages')
                if not isinstance(messages, list) or not messages:
                    self._error(400, 'messages must be a non-empty list')
                    return
                prompt = '\n'.join(_text_of(m.get('content')) for m in messages if isinstance(m, dict))
                last_user = ''
                for m in messages:
                    if isinstance(m, dict) and m.get('role') == 'user':
                        last_user = _text_of(m.get('content'))
                prompt_tokens = eng.prompt_tokens_override(prompt) or (eng.count_prompt_tokens(prompt) + 4 * len(messages))
                answer_prompt = last_user or prompt
            else:
                prompt = body.get('prompt')
                # a list of token ids is the prompt itself, one token each (as vLLM takes it)
                token_ids = isinstance(prompt, list) and bool(prompt) and all(
                    isinstance(p, int) and not isinstance(p, bool) for p in prompt)
                n_ids = len(prompt) if token_ids else 0
                if isinstance(prompt, list):
                    prompt = ' '.join(str(p) for p in prompt)
                if not isinstance(prompt, str):
                    self._error(400, 'prompt must be a string')
                    return
                prompt_tokens = n_ids or eng.prompt_tokens_override(prompt) or eng.count_prompt_tokens(prompt)
                answer_prompt = prompt
            # vLLM 0.26.0's refusals (recorded: tests/fixtures/real_vllm/engine_error.json)
            max_tokens = body.get('max_completion_tokens', body.get('max_tokens'))
            if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
                self._param_error('max_tokens must be at least 1, got %s.' % max_tokens, 'max_tokens', max_tokens)
                return
            temperature = body.get('temperature')
            if temperature is not None and (not isinstance(temperature, (int, float)) or temperature < 0):
                self._param_error('temperature must be non-negative, got %s.' % _py_repr(temperature), 'temperature',
                                  _py_repr(temperature))
                return
            room = state.cfg.max_model_len - prompt_tokens
            if room <= 0 and max_tokens is None:
                self._error(400, "This model's maximum context length is %d tokens. However, your request has %d input "
                                 'tokens. Please reduce the length of the input messages.' % (state.cfg.max_model_len, prompt_tokens))
                return
            if max_tokens is not None and max_tokens > room:
                self._param_error("This model's maximum context length is %d tokens. However, you requested %d output tokens "
                                  'and your prompt contains at least %d input tokens, for a total of at least %d tokens. '
                                  'Please reduce the length of the input prompt or the number of requested output tokens.'
                                  % (state.cfg.max_model_len, max_tokens, prompt_tokens, prompt_tokens + max_tokens),
                                  'input_tokens', prompt_tokens)
                return
            tools = body.get('tools') if chat else None
            tool_choice = body.get('tool_choice', 'auto' if tools else 'none')
            call_tool = None
            if tools and tool_choice != 'none':
                if tool_choice == 'auto' and not (state.cfg.auto_tool_choice and state.cfg.tool_call_parser):
                    self._error(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
                    return
                call_tool = tools[0]
                if isinstance(tool_choice, dict):
                    name = (tool_choice.get('function') or {}).get('name')
                    call_tool = next((t for t in tools if (t.get('function') or {}).get('name') == name), tools[0])
            thinking = False
            if chat:
                kwargs = dict(state.cfg.chat_template_kwargs)
                kwargs.update(body.get('chat_template_kwargs') or {})
                thinking = bool(kwargs.get('thinking', kwargs.get('enable_thinking', False)))
            stream = bool(body.get('stream'))
            include_usage = bool((body.get('stream_options') or {}).get('include_usage')) or state.cfg.force_usage
            self._generate(chat, answer_prompt, prompt, prompt_tokens, max_tokens, call_tool, thinking, stream,
                           include_usage, body)

        def _plan(self, answer_prompt, max_tokens, call_tool, thinking):
            """List of (kind, text) tokens and the finish reason."""
            cfg = state.cfg
            garble = eng.garble_mode_for(answer_prompt, state.garble)
            if garble is None and cfg.garble_min_concurrency and state.engine.concurrency() >= cfg.garble_min_concurrency:
                garble = cfg.garble_concurrent_mode
            plan = []
            budget = max_tokens
            if thinking:
                rtoks = eng.words_to_tokens(eng.REASONING.split())
                if budget is not None:
                    rtoks = rtoks[:budget]
                    budget -= len(rtoks)
                kind = 'reasoning' if cfg.reasoning_parser else 'content'
                plan += [(kind, t) for t in rtoks]
                if not cfg.reasoning_parser:
                    plan.append(('content', '</think>'))
                if budget is not None and budget <= 0:
                    return plan, 'length'
            if call_tool is not None and garble is None:
                args = eng.tool_arguments(call_tool, answer_prompt)
                name = (call_tool.get('function') or {}).get('name', 'tool')
                pieces = eng.split_pieces(args)
                plan.append(('tool_name', name))
                plan += [('tool_args', p) for p in pieces]
                return plan, 'tool_calls'
            toks, finish = eng.content_tokens(answer_prompt, budget, garble, cfg.default_reply_tokens)
            plan += [('content', t) for t in toks]
            return plan, finish

        def _generate(self, chat, answer_prompt, prompt, prompt_tokens, max_tokens, call_tool, thinking, stream,
                      include_usage, body):
            engine = state.engine
            t_arrive = time.monotonic()
            created = int(time.time())
            req_id = ('chatcmpl-' if chat else 'cmpl-') + uuid.uuid4().hex
            try:
                # planned when the engine admits it (engine.Request.make_plan)
                req = engine.submit(prompt, prompt_tokens, lambda: self._plan(answer_prompt, max_tokens, call_tool, thinking),
                                    t_arrive)
            except eng.EngineDead:
                self._send(500, ENGINE_DEAD_ERROR)
                return
            sent_headers = [False]
            finished = False
            model = state.cfg.served_names[0]
            try:
                state.execute_model_rpc()
                if state.cfg.fail == 'hang':
                    engine.stop.wait()
                    raise eng.EngineDead()
                if stream:
                    def start():
                        # the response starts with the first token (an engine death before it is an HTTP 500)
                        self.send_response(200)
                        self.send_header('content-type', 'text/event-stream; charset=utf-8')
                        self.send_header('transfer-encoding', 'chunked')
                        self.send_header('cache-control', 'no-cache')
                        self.end_headers()
                        sent_headers[0] = True
                        self._access(200)
                        if chat:
                            self._sse(_chunk(req_id, created, model, {'role': 'assistant', 'content': ''}, None, chat))
                    ttft = self._emit(req, t_arrive, start, lambda kind, text, idx: self._sse(
                        _chunk(req_id, created, model, _delta(kind, text, idx, chat), None, chat)))
                    # vLLM V1 frees a finished request's KV blocks and counts it before its last output reaches the
                    # API server (Scheduler.update_from_output, then AsyncLLM's output handler records the stats in
                    # the same pass): a client that has the final chunk reads the gauges and counters without it.
                    finished = self._finish(req, req.finish, ttft, t_arrive)
                    self._sse(_chunk(req_id, created, model, {} if chat else '', req.finish, chat))
                    if include_usage:
                        self._sse({'id': req_id, 'object': 'chat.completion.chunk' if chat else 'text_completion',
                                   'created': created, 'model': model, 'choices': [],
                                   'usage': _usage(prompt_tokens, req.n_out, req.plan)})
                    self._raw_chunk(b'data: [DONE]\n\n')
                    self._raw_chunk(b'')
                else:
                    ttft = self._emit(req, t_arrive, None, None)
                    finished = self._finish(req, req.finish, ttft, t_arrive)   # before the response, as above
                    self._send(200, _full_response(req_id, created, model, req.plan, req.finish, chat,
                                                   _usage(prompt_tokens, req.n_out, req.plan)))
            except eng.EngineDead:
                if not sent_headers[0]:
                    self._send(500, ENGINE_DEAD_ERROR)
                else:
                    try:
                        self._sse(ENGINE_DEAD_ERROR)
                        self._raw_chunk(b'data: [DONE]\n\n')
                        self._raw_chunk(b'')
                    except OSError:
                        pass
                self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                if not finished:
                    engine.finished('abort', None, time.monotonic() - t_arrive)
                self.close_connection = True
            finally:
                engine.discard(req)   # no-op when the engine freed it already

        def _finish(self, req, finish, ttft, t_arrive):
            """The request ends in the engine: counted (success, TTFT, e2e latency) and its KV blocks freed."""
            engine = state.engine
            engine.finished(finish, ttft, time.monotonic() - t_arrive)
            engine.discard(req)
            return True

        def _emit(self, req, t_arrive, on_first, sink):
            """Send the request's tokens as the engine generates them; returns TTFT (seconds from arrival to the
            first token)."""
            ttft = None
            for idx in state.engine.outputs(req):
                if ttft is None:
                    ttft = time.monotonic() - t_arrive
                    if on_first is not None:
                        on_first()
                if sink is not None and idx < len(req.plan):
                    kind, text = req.plan[idx]
                    sink(kind, text, idx)
            return ttft

        def _raw_chunk(self, data):
            self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
            self.wfile.flush()

        def _sse(self, obj):
            self._raw_chunk(('data: ' + json.dumps(obj, ensure_ascii=False) + '\n\n').encode())

    return Handler


def _py_repr(value):
    """A number as Python prints it (-1 -> -1.0 for a float parameter, like vLLM's pydantic model)."""
    return repr(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def _text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return ' '.join(str(p.get('text', '')) for p in content if isinstance(p, dict))
    return '' if content is None else str(content)


def _usage(prompt_tokens, n_out, plan):
    usage = {'prompt_tokens': prompt_tokens, 'completion_tokens': n_out, 'total_tokens': prompt_tokens + n_out}
    reasoning = sum(1 for kind, _text in plan if kind == 'reasoning')
    if reasoning:
        usage['completion_tokens_details'] = {'reasoning_tokens': reasoning}
    return usage


def _tool_call_id():
    return 'chatcmpl-tool-' + uuid.uuid4().hex[:24]


_TOOL_IDS = threading.local()


def _delta(kind, text, idx, chat):
    if not chat:
        return text
    if kind == 'reasoning':
        return {'reasoning': text, 'reasoning_content': text}
    if kind == 'tool_name':
        _TOOL_IDS.current = _tool_call_id()
        return {'tool_calls': [{'index': 0, 'id': _TOOL_IDS.current, 'type': 'function',
                                'function': {'name': text, 'arguments': ''}}]}
    if kind == 'tool_args':
        return {'tool_calls': [{'index': 0, 'function': {'arguments': text}}]}
    return {'content': text}


def _chunk(req_id, created, model, delta, finish, chat):
    if chat:
        return {'id': req_id, 'object': 'chat.completion.chunk', 'created': created, 'model': model,
                'choices': [{'index': 0, 'delta': delta, 'logprobs': None, 'finish_reason': finish}]}
    return {'id': req_id, 'object': 'text_completion', 'created': created, 'model': model,
            'choices': [{'index': 0, 'text': delta, 'logprobs': None, 'finish_reason': finish}]}


def _full_response(req_id, created, model, plan, finish, chat, usage):
    content = ''.join(t for k, t in plan if k == 'content')
    if not chat:
        return {'id': req_id, 'object': 'text_completion', 'created': created, 'model': model,
                'choices': [{'index': 0, 'text': content, 'logprobs': None, 'finish_reason': finish}], 'usage': usage}
    reasoning = ''.join(t for k, t in plan if k == 'reasoning') or None
    message = {'role': 'assistant', 'content': content, 'reasoning': reasoning, 'reasoning_content': reasoning,
               'tool_calls': []}
    names = [t for k, t in plan if k == 'tool_name']
    if names:
        message['content'] = content or None
        message['tool_calls'] = [{'id': _tool_call_id(), 'type': 'function',
                                  'function': {'name': names[0], 'arguments': ''.join(t for k, t in plan if k == 'tool_args')}}]
    return {'id': req_id, 'object': 'chat.completion', 'created': created, 'model': model,
            'choices': [{'index': 0, 'message': message, 'logprobs': None, 'finish_reason': finish, 'stop_reason': None}],
            'usage': usage}
