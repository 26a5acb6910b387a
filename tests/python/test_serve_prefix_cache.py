"""`kael serve --prefix-cache-mb`: the KV blocks of recent prompts are kept, and a request whose
prompt starts with the same whole blocks prefills only the rest. What it generates (text and
log-probabilities, greedy and seeded sampling) is identical with the cache on and off, and
/metrics counts the hits, the misses and the tokens reused."""
from test_serve_support import Server

# A long shared preamble (more than three whole blocks of 32 tokens) and short questions.
PREAMBLE = ("You are a careful assistant. Answer in one short sentence, plainly, without lists. "
            "The following are examples of questions and answers about the weather, the sea, "
            "mountains, rivers and the stars, written for children who are learning to read. "
            "Each answer names one fact that a child can check at home, in a garden or at a "
            "window, and it never uses a word of more than three syllables when a shorter one "
            "will do. Questions come one at a time, and each is answered on its own. ")
QUESTIONS = ["Why is the sky blue?", "Why is the sea salty?", "Why is the sky blue?", "How far is the moon?"]


def run_requests(server):
    """Each question after the preamble, greedy then seeded sampling, with log-probabilities."""
    out = []
    for question in QUESTIONS:
        for fields in ({"temperature": 0}, {"temperature": 0.9, "top_k": 40, "seed": 7}):
            body = server.complete(prompt=PREAMBLE + question, max_tokens=12, logprobs=2, ignore_eos=True, **fields)
            choice = body["choices"][0]
            out.append((choice["text"], choice["logprobs"]["token_logprobs"], choice["logprobs"]["top_logprobs"]))
    return out


def test_results_are_identical_with_and_without_the_prefix_cache(serve_model_dir, tmp_path):
    with Server(serve_model_dir, "--prefix-cache-mb", 0, "--threads", 1, log_dir=tmp_path) as s:
        without = run_requests(s)
        assert s.metric("kael_prefix_cache_hits_total") == 0
        assert s.metric("kael_prefix_cache_blocks") == 0
    with Server(serve_model_dir, "--prefix-cache-mb", 4, "--threads", 1, log_dir=tmp_path) as s:
        prefilled_before = s.metric("kael_prompt_tokens_total")
        cached = run_requests(s)
        assert cached == without, "the prefix cache changed what was generated"
        hits, misses = s.metric("kael_prefix_cache_hits_total"), s.metric("kael_prefix_cache_misses_total")
        reused = s.metric("kael_prefix_cache_reused_tokens_total")
        assert misses == 1 and hits == 2 * len(QUESTIONS) - 1, (hits, misses)
        # Every hit skipped at least the preamble's whole blocks (its last token may merge with
        # the question's first), and the prompt tokens not reused were prefilled.
        status, ids = s.post_json("/tokenize", {"text": PREAMBLE})
        preamble_blocks = (len(ids["ids"]) - 1) // 32
        assert preamble_blocks >= 3
        assert reused >= hits * 32 * preamble_blocks and reused % 32 == 0, reused
        assert s.metric("kael_prefix_cache_blocks") >= preamble_blocks
        prompt_tokens = 0
        for q in QUESTIONS:
            status, q_ids = s.post_json("/tokenize", {"text": PREAMBLE + q})
            prompt_tokens += 2 * len(q_ids["ids"])
        assert s.metric("kael_prompt_tokens_total") - prefilled_before + reused == prompt_tokens
        assert s.metric("kael_kv_blocks_used") == 0  # cached blocks nobody holds are free to take


def test_bad_prefix_cache_size_is_an_error(kael, serve_model_dir):
    result = kael("serve", "--model", serve_model_dir, "--port", 0, "--prefix-cache-mb", -1, check=False)
    assert result.returncode != 0 and b"prefix-cache-mb" in result.stderr


def test_prefix_cache_never_claims_more_blocks_than_the_kv_memory(serve_model_dir, tmp_path):
    """Cached blocks are KV blocks kept after their request: a cap above the pool is the pool."""
    import re
    with Server(serve_model_dir, "--kv-memory-mb", 1, "--prefix-cache-mb", 64, "--threads", 1, log_dir=tmp_path) as s:
        s.complete(prompt=PREAMBLE, max_tokens=2)
        line = re.search(r"KV memory (\d+) blocks .*; prefix cache (\d+) blocks", s.log())
        assert line, s.log()
        kv_blocks, cache_blocks = int(line.group(1)), int(line.group(2))
        assert 0 < cache_blocks <= kv_blocks, line.group(0)
        assert s.metric("kael_prefix_cache_blocks") <= kv_blocks
