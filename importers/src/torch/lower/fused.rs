//! PyTorch's fused inference fast paths, which `torch.jit.trace` records for
//! `nn.MultiheadAttention` and `nn.TransformerEncoderLayer` in eval mode
//! (`_native_multi_head_attention`, `_transformer_encoder_layer_fwd`),
//! spelled out as the ONNX nodes of their definition: packed q/k/v
//! projections split three ways, heads split and merged by reshapes, scaled
//! dot-product attention, the output projection, and for the encoder layer
//! the layer norms (before or after) and the feed-forward block.

use super::args::Args;
use super::builder::{attr_float, attr_int, attr_ints};
use super::interp::Interp;
use super::value::{Val, T};
use diamond_ir::ElemType;

type R<'a> = Result<Val<'a>, String>;

impl<'a> Interp<'a> {
    /// `_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
    /// proj_weight, proj_bias, mask=None, need_weights=True, ...)` → `(output, weights)`.
    pub(super) fn native_mha(&mut self, a: &Args<'a>) -> R<'a> {
        let (q, k, v) = (a.tensor(0, "query")?, a.tensor(1, "key")?, a.tensor(2, "value")?);
        let (embed, heads) = (a.int(3, "embed_dim", 0)?, a.int(4, "num_head", 1)?);
        let weights = [a.tensor(5, "qkv_weight")?, a.tensor(7, "proj_weight")?];
        let biases = [a.tensor(6, "qkv_bias")?, a.tensor(8, "proj_bias")?];
        if a.bool(10, "need_weights", true)? {
            return Err("_native_multi_head_attention with need_weights=True".into());
        }
        let mask = a.opt_tensor(9, "mask")?;
        let out = self.mha(q, k, v, embed, heads, weights, biases, mask)?;
        Ok(Val::Tuple(vec![Val::Tensor(out), Val::None]))
    }

    /// Multi-head attention with packed input projections.
    #[allow(clippy::too_many_arguments)]
    fn mha(
        &mut self,
        q: T,
        k: T,
        v: T,
        embed: i64,
        heads: i64,
        w: [T; 2],
        b: [T; 2],
        mask: Option<T>,
    ) -> Result<T, String> {
        if heads <= 0 || embed % heads != 0 {
            return Err(format!("multi-head attention: {embed} features in {heads} heads"));
        }
        let origin = self.origin.clone();
        let ws = self.b.node("Split", &[w[0].id], 3, vec![attr_int("axis", 0), attr_int("num_outputs", 3)], &origin);
        let bs = self.b.node("Split", &[b[0].id], 3, vec![attr_int("axis", 0), attr_int("num_outputs", 3)], &origin);
        let part = |id| T { id, elem: w[0].elem, rank: Some(2) };
        let bias = |id| T { id, elem: b[0].elem, rank: Some(1) };
        let mut projected = Vec::new();
        for (i, x) in [q, k, v].into_iter().enumerate() {
            let y = self.linear_t(x, part(ws[i]), Some(bias(bs[i])));
            projected.push(self.split_heads(y, heads, embed / heads));
        }
        let attended = self.attention_t(projected[0], projected[1], projected[2], mask, false, None)?;
        let merged = self.merge_heads(attended, embed);
        Ok(self.linear_t(merged, w[1], Some(b[1])))
    }

    /// `[B, L, E]` → `[B, H, L, E/H]`.
    fn split_heads(&mut self, x: T, heads: i64, width: i64) -> T {
        let prefix = self.shape_prefix(x, 2);
        let tail = self.b.const_vector(&[heads, width]);
        let shape = self.emit_t("Concat", &[prefix, tail], vec![attr_int("axis", 0)], Some(ElemType::Int64), Some(1));
        let shaped = self.emit_t("Reshape", &[x.id, shape.id], vec![], x.elem, Some(4));
        let perm = attr_ints("perm", &[0, 2, 1, 3]);
        self.emit_t("Transpose", &[shaped.id], vec![perm], x.elem, Some(4))
    }

    /// `[B, H, L, D]` → `[B, L, H·D]`.
    fn merge_heads(&mut self, x: T, embed: i64) -> T {
        let perm = attr_ints("perm", &[0, 2, 1, 3]);
        let t = self.emit_t("Transpose", &[x.id], vec![perm], x.elem, Some(4));
        let prefix = self.shape_prefix(t, 2);
        let tail = self.b.const_vector(&[embed]);
        let shape = self.emit_t("Concat", &[prefix, tail], vec![attr_int("axis", 0)], Some(ElemType::Int64), Some(1));
        self.emit_t("Reshape", &[t.id, shape.id], vec![], x.elem, Some(3))
    }

    /// The first `n` sizes of `x`'s shape, as a 1-D int64 value.
    fn shape_prefix(&mut self, x: T, n: i64) -> diamond_ir::ValueId {
        let shape = self.emit_t("Shape", &[x.id], vec![], Some(ElemType::Int64), Some(1));
        let (s, e) = (self.b.const_vector(&[0]), self.b.const_vector(&[n]));
        self.emit_t("Slice", &[shape.id, s, e], vec![], Some(ElemType::Int64), Some(1)).id
    }

    /// `_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
    /// proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
    /// ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None)`.
    pub(super) fn encoder_layer(&mut self, a: &Args<'a>) -> R<'a> {
        let src = a.tensor(0, "src")?;
        let (embed, heads) = (a.int(1, "embed_dim", 0)?, a.int(2, "num_heads", 1)?);
        let attn_w = [a.tensor(3, "qkv_weight")?, a.tensor(5, "proj_weight")?];
        let attn_b = [a.tensor(4, "qkv_bias")?, a.tensor(6, "proj_bias")?];
        let (gelu, norm_first, eps) =
            (a.bool(7, "use_gelu", false)?, a.bool(8, "norm_first", false)?, a.float(9, "eps", 1e-5)?);
        let norm1 = (a.tensor(10, "norm_weight_1")?, a.tensor(11, "norm_bias_1")?);
        let norm2 = (a.tensor(12, "norm_weight_2")?, a.tensor(13, "norm_bias_2")?);
        let ffn = [
            a.tensor(14, "ffn_weight_1")?,
            a.tensor(15, "ffn_bias_1")?,
            a.tensor(16, "ffn_weight_2")?,
            a.tensor(17, "ffn_bias_2")?,
        ];
        let mask = a.opt_tensor(18, "mask")?;
        let x = if norm_first {
            let h = self.norm(src, norm1, eps);
            let attended = self.mha(h, h, h, embed, heads, attn_w, attn_b, mask)?;
            let x = self.add(src, attended);
            let h = self.norm(x, norm2, eps);
            let f = self.feed_forward(h, ffn, gelu);
            self.add(x, f)
        } else {
            let attended = self.mha(src, src, src, embed, heads, attn_w, attn_b, mask)?;
            let sum = self.add(src, attended);
            let x = self.norm(sum, norm1, eps);
            let f = self.feed_forward(x, ffn, gelu);
            let sum = self.add(x, f);
            self.norm(sum, norm2, eps)
        };
        Ok(Val::Tensor(x))
    }

    fn norm(&mut self, x: T, (w, b): (T, T), eps: f64) -> T {
        let attrs = vec![attr_int("axis", -1), attr_float("epsilon", eps)];
        self.emit_t("LayerNormalization", &[x.id, w.id, b.id], attrs, x.elem, x.rank)
    }

    fn add(&mut self, x: T, y: T) -> T {
        self.emit_t("Add", &[x.id, y.id], vec![], x.elem, x.rank)
    }

    /// linear2(act(linear1(x))).
    fn feed_forward(&mut self, x: T, [w1, b1, w2, b2]: [T; 4], gelu: bool) -> T {
        let h = self.linear_t(x, w1, Some(b1));
        let h = self.emit_t(if gelu { "Gelu" } else { "Relu" }, &[h.id], vec![], h.elem, h.rank);
        self.linear_t(h, w2, Some(b2))
    }
}
