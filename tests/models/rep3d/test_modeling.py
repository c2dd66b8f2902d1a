import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel, AutoModelForSemanticSegmentation

from hf_ext.models.rep3d import Rep3DConfig, Rep3DConv, Rep3DForSegmentation, Rep3DModel, dice_ce_loss

TINY = {"hidden_sizes": [4, 8], "depths": [1, 1], "kernel_sizes": [5, 3], "decoder_hidden_size": 8, "num_labels": 3}


def _model(seed=0, **overrides) -> Rep3DForSegmentation:
    torch.manual_seed(seed)
    return Rep3DForSegmentation(Rep3DConfig(**TINY | overrides)).eval()


def _trained_looking(model: Rep3DForSegmentation) -> Rep3DForSegmentation:
    """Every tensor moved off its initialisation, so that a weight that fails to load shows in the outputs."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01)
    return model


def _batch(size=(8, 8, 8), batch=2, num_labels=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    pixel_values = torch.randn(batch, 1, *size, generator=generator)
    return pixel_values, torch.randint(num_labels, (batch, *size), generator=generator)


def test_default_config_is_a_four_stage_encoder_with_kernel_21():
    config = Rep3DConfig()
    assert len(config.hidden_sizes) == 4 and config.kernel_sizes == [21] * 4 and config.stride_product == 16
    assert config.mask_mode == "learned"


def test_logits_have_the_input_resolution_and_the_loss_is_ce_plus_dice():
    model = _model()
    pixel_values, labels = _batch(size=(8, 12, 9))  # sides need not be multiples of the stride product (4)
    out = model(pixel_values=pixel_values, labels=labels)
    assert out.logits.shape == (2, 3, 8, 12, 9)
    torch.testing.assert_close(out.loss, dice_ce_loss(out.logits, labels))
    assert Rep3DForSegmentation(Rep3DConfig(**TINY | {"dice_weight": 0.0}))(pixel_values, labels).loss > 0


def test_every_large_kernel_is_a_rep3d_conv_with_the_configured_mask():
    model = _model(mask_mode="prior")
    convs = [m for m in model.modules() if isinstance(m, Rep3DConv)]
    assert [c.conv.kernel_size[0] for c in convs] == [5, 3]
    assert all(c.mask_mode == "prior" for c in convs)


def test_deployed_model_gives_the_same_logits_and_saves_as_plain_convolutions(tmp_path):
    model = _model()
    with torch.no_grad():  # a trained-looking modulation net, so that the mask is not the prior
        for conv in (m for m in model.modules() if isinstance(m, Rep3DConv)):
            conv.modulation.out.weight.normal_(0, 0.05)
    pixel_values, _ = _batch()
    before = model(pixel_values).logits
    model.deploy()
    assert model.config.mask_mode == "none" and not any("modulation" in n for n, _ in model.named_parameters())
    torch.testing.assert_close(model(pixel_values).logits, before, rtol=1e-4, atol=1e-5)
    model.save_pretrained(tmp_path)
    reloaded = Rep3DForSegmentation.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(reloaded(pixel_values).logits, before, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_mode", ["learned", "prior", "none"])
def test_save_and_load_round_trip(tmp_path, mask_mode):
    model = _trained_looking(_model(mask_mode=mask_mode))
    pixel_values, labels = _batch()
    model.save_pretrained(tmp_path)
    reloaded = Rep3DForSegmentation.from_pretrained(tmp_path).eval()
    assert reloaded.config.to_diff_dict() | {"_name_or_path": ""} == model.config.to_diff_dict() | {"_name_or_path": ""}
    for (name, a), (_, b) in zip(model.state_dict().items(), reloaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    torch.testing.assert_close(reloaded(pixel_values, labels).loss, model(pixel_values, labels).loss)


def test_fresh_model_starts_from_the_prior_mask():
    model = _model(mask_mode="learned")
    conv = next(m for m in model.modules() if isinstance(m, Rep3DConv))
    torch.testing.assert_close(conv.mask(), conv.prior.expand_as(conv.mask()))


def test_one_training_step_moves_the_modulation_net():
    model = _model().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    pixel_values, labels = _batch()
    for _ in range(2):  # the first step moves the zero-initialised layer, the second the one before it
        optimizer.zero_grad()
        model(pixel_values, labels).loss.backward()
        optimizer.step()
    conv = next(m for m in model.modules() if isinstance(m, Rep3DConv))
    assert not torch.allclose(conv.mask(), conv.prior.expand_as(conv.mask()))
    assert conv.modulation.hidden.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"kernel_sizes": [5, 4]},
            r"`kernel_sizes\[1\]` must be an odd integer >= 1 \(padding k // 2 keeps the shape\), got 4",
        ),
        ({"mask_mode": "soft"}, r"`mask_mode` must be one of \['learned', 'prior', 'none'\], got 'soft'"),
        ({"depths": [1]}, "hidden_sizes, depths, kernel_sizes must have one entry per stage"),
        ({"hidden_sizes": [4, 0]}, "`hidden_sizes` must be a non-empty list of integers >= 1"),
        ({"stem_stride": 0}, "`stem_stride` must be an integer >= 1, got 0"),
        ({"dice_weight": -1.0}, "`dice_weight` must be >= 0, got -1.0"),
        ({"dice_weight": float("nan")}, "`dice_weight` must be a finite number, got nan"),
        ({"num_labels": 1}, "`num_labels` must be >= 2"),
    ],
)
def test_bad_config_names_the_field(overrides, message):
    with pytest.raises(ValueError, match="Rep3DConfig: " + message):
        Rep3DConfig(**TINY | overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"depths": 5}, r"`depths` must be a list \(\[5\] for one\), got 5 \(int\)"),
        ({"hidden_sizes": [4, 8.0]}, r"`hidden_sizes\[1\]` must be an integer, got 8.0"),
        ({"kernel_sizes": [5, True]}, r"`kernel_sizes\[1\]` must be an integer, got True"),
    ],
)
def test_a_stage_list_of_another_type_is_refused_by_name(overrides, message):
    """Issue 72: a scalar failed as "'int' object is not iterable"; 8.0 and True passed as sizes."""
    with pytest.raises(TypeError, match="Rep3DConfig: " + message):
        Rep3DConfig(**TINY | overrides)


def test_a_volume_smaller_than_the_stride_product_is_refused():
    model = _model()  # stem stride 2, two stages: stride product 4
    with pytest.raises(ValueError, match=r"sides must be at least the encoder's stride product 4 .*got \(8, 3, 8\)"):
        model(torch.randn(1, 1, 8, 3, 8))


@pytest.mark.parametrize("bad", [3, -1])
def test_labels_outside_the_class_range_are_refused(bad):
    pixel_values, labels = _batch()
    labels[0, 0, 0, 0] = bad
    with pytest.raises(ValueError, match=r"`labels` must be class indices in 0..2, got values from"):
        _model()(pixel_values, labels)


def test_wrong_input_shapes_are_refused():
    pixel_values, labels = _batch()
    with pytest.raises(ValueError, match=r"`pixel_values` must have shape \(batch, 1, D, H, W\), got \(2, 2, 8, 8"):
        _model()(pixel_values.repeat(1, 2, 1, 1, 1))
    with pytest.raises(ValueError, match=r"`labels` must have shape \(batch, D, H, W\)"):
        _model()(pixel_values, labels[:, :4])


def test_return_dict_false_returns_a_tuple_loss_first():
    model = _model()
    pixel_values, labels = _batch()
    out = model(pixel_values, labels)
    loss, logits = model(pixel_values, labels, return_dict=False)
    torch.testing.assert_close(loss, out.loss)
    torch.testing.assert_close(logits, out.logits)
    (last_hidden_state,) = model.rep3d(pixel_values, return_dict=False)
    assert last_hidden_state.shape == (2, 8, 2, 2, 2)


def test_config_return_dict_false_makes_every_forward_return_a_tuple():
    model = _model(return_dict=False)
    pixel_values, labels = _batch()
    assert isinstance(model(pixel_values, labels), tuple) and isinstance(model.rep3d(pixel_values), tuple)
    assert model(pixel_values, labels, return_dict=True).loss is not None  # the argument wins over the config


def test_hidden_states_are_each_encoder_stage_output():
    model = _model()
    pixel_values, _ = _batch(size=(8, 12, 8))
    out = model(pixel_values, output_hidden_states=True)
    assert [tuple(h.shape) for h in out.hidden_states] == [(2, 4, 4, 6, 4), (2, 8, 2, 3, 2)]
    encoder = model.rep3d(pixel_values, output_hidden_states=True)
    torch.testing.assert_close(out.hidden_states[-1], encoder.last_hidden_state)
    assert model(pixel_values).hidden_states is None and encoder.hidden_states is not None
    assert len(_model(output_hidden_states=True)(pixel_values).hidden_states) == 2  # config.output_hidden_states


def test_unknown_forward_arguments_are_refused():
    pixel_values, labels = _batch()
    with pytest.raises(TypeError, match="unexpected keyword argument 'label'"):
        _model()(pixel_values, label=labels)  # a typo must not train without a loss


def test_the_encoder_is_the_base_model_under_base_model_prefix():
    model = _model()
    assert isinstance(model.base_model, Rep3DModel) and model.base_model is model.rep3d
    assert all(name.startswith(("rep3d.stages.", "laterals.", "head.")) for name in model.state_dict())


def test_auto_classes_build_and_reload_rep3d(tmp_path):
    config = AutoConfig.for_model("rep3d", **TINY)
    assert isinstance(config, Rep3DConfig)
    assert isinstance(AutoModel.from_config(config), Rep3DModel)
    torch.manual_seed(0)
    model = _trained_looking(AutoModelForSemanticSegmentation.from_config(config)).eval()
    assert isinstance(model, Rep3DForSegmentation)
    model.save_pretrained(tmp_path)
    pixel_values, _ = _batch()
    reloaded = AutoModelForSemanticSegmentation.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(reloaded(pixel_values).logits, model(pixel_values).logits)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), Rep3DConfig)
    encoder = AutoModel.from_pretrained(tmp_path).eval()  # the encoder of the segmentation checkpoint
    assert isinstance(encoder, Rep3DModel)
    torch.testing.assert_close(encoder(pixel_values).last_hidden_state, model.rep3d(pixel_values).last_hidden_state)


def test_a_checkpoint_saved_before_the_encoder_split_still_loads(tmp_path):
    """Checkpoints written before ``Rep3DModel`` existed hold the encoder as ``stages.*``, without ``rep3d.``."""
    model = _trained_looking(_model())
    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    save_file({k.removeprefix("rep3d."): v for k, v in weights.items()}, tmp_path / "model.safetensors")
    assert "stages.0.blocks.0.mixer.conv.weight" in load_file(tmp_path / "model.safetensors")
    reloaded, info = Rep3DForSegmentation.from_pretrained(tmp_path, output_loading_info=True)
    assert not any(info.values()), info
    pixel_values, _ = _batch()
    torch.testing.assert_close(reloaded.eval()(pixel_values).logits, model(pixel_values).logits)


def _loss_and_gradients(model, pixel_values, labels):
    model.zero_grad()
    loss = model(pixel_values, labels).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


def test_activation_checkpointing_recomputes_the_blocks_with_the_same_loss_and_gradients():
    model = _model().train()
    pixel_values, labels = _batch()
    loss, gradients = _loss_and_gradients(model, pixel_values, labels)
    model.activation_checkpointing_enable()
    calls = []
    model.rep3d.stages[0].blocks[0].mixer.register_forward_hook(lambda *_: calls.append(torch.is_grad_enabled()))
    checkpointed_loss, checkpointed_gradients = _loss_and_gradients(model, pixel_values, labels)
    assert len(calls) == 2  # the forward pass and its recomputation in the backward pass
    torch.testing.assert_close(checkpointed_loss, loss, rtol=0, atol=0)
    for name, gradient in gradients.items():
        torch.testing.assert_close(checkpointed_gradients[name], gradient, rtol=1e-6, atol=1e-7, msg=name)
