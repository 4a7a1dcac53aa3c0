//! llama.cpp's tensor names → Hugging Face's, and the one layout change llama.cpp makes on
//! the way in: for `llama`-architecture files its converter interleaves the two rotary halves
//! of every q and k head (`LlamaModel.permute` in `convert_hf_to_gguf.py`), which
//! [`unpermute_rows`] undoes. Qwen2 and Qwen3 files are written unpermuted.

/// The HF name of a GGUF tensor, or `None` for a tensor HF models do not have.
pub fn hf_name(gguf: &str) -> Option<String> {
    let fixed = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return Some(name.to_string());
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, param) = rest.rsplit_once('.')?;
    if param != "weight" && param != "bias" {
        return None;
    }
    let hf = match module {
        "attn_norm" => "input_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_norm" => "post_attention_layernorm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}.{param}"))
}

/// Undo llama.cpp's rotary permutation of a q or k projection (weight `[heads·head_dim, in]`
/// or bias `[heads·head_dim]`, `row_len` = in, or 1 for a bias): within each head, GGUF row
/// `2j + s` is HF row `s·head_dim/2 + j`.
pub fn unpermute_rows(data: &[f32], n_heads: usize, row_len: usize) -> Vec<f32> {
    let rows = data.len() / row_len;
    let head_dim = rows / n_heads;
    let half = head_dim / 2;
    let mut out = vec![0f32; data.len()];
    for h in 0..n_heads {
        for j in 0..half {
            for s in 0..2 {
                let from = h * head_dim + 2 * j + s;
                let to = h * head_dim + s * half + j;
                out[to * row_len..(to + 1) * row_len].copy_from_slice(&data[from * row_len..(from + 1) * row_len]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(hf_name("blk.12.attn_q.weight").unwrap(), "model.layers.12.self_attn.q_proj.weight");
        assert_eq!(hf_name("blk.0.attn_k.bias").unwrap(), "model.layers.0.self_attn.k_proj.bias");
        assert_eq!(hf_name("blk.3.ffn_norm.weight").unwrap(), "model.layers.3.post_attention_layernorm.weight");
        assert_eq!(hf_name("blk.3.attn_k_norm.weight").unwrap(), "model.layers.3.self_attn.k_norm.weight");
        assert_eq!(hf_name("output.weight").unwrap(), "lm_head.weight");
        assert_eq!(hf_name("rope_freqs.weight"), None);
        assert_eq!(hf_name("blk.x.attn_q.weight"), None);
    }

    /// llama.cpp's permutation, written as `convert_hf_to_gguf.py` writes it:
    /// `w.reshape(n_head, 2, rows // n_head // 2, *rest).swapaxes(1, 2).reshape(w.shape)`.
    fn permute(data: &[f32], n_heads: usize, row_len: usize) -> Vec<f32> {
        let rows = data.len() / row_len;
        let half = rows / n_heads / 2;
        let mut out = Vec::with_capacity(data.len());
        for h in 0..n_heads {
            for j in 0..half {
                for s in 0..2 {
                    let from = h * 2 * half + s * half + j;
                    out.extend_from_slice(&data[from * row_len..(from + 1) * row_len]);
                }
            }
        }
        out
    }

    #[test]
    fn unpermute_inverts_llama_cpp_permute() {
        let (heads, head_dim, row_len) = (3, 8, 5);
        let w: Vec<f32> = (0..heads * head_dim * row_len).map(|i| i as f32).collect();
        let permuted = permute(&w, heads, row_len);
        assert_ne!(permuted, w);
        assert_eq!(unpermute_rows(&permuted, heads, row_len), w);
        let bias: Vec<f32> = (0..heads * head_dim).map(|i| i as f32).collect();
        assert_eq!(unpermute_rows(&permute(&bias, heads, 1), heads, 1), bias);
    }
}
