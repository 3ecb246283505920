from __future__ import annotations

from django import forms

from campaigns.models import RESERVED_KEYS, Assessor, Campaign, LabelSpec, validate_scale
from campaigns.scales import SCALES


class CampaignForm(forms.ModelForm):
    scale = forms.ChoiceField(
        choices=[(name, scale.title) for name, scale in SCALES.items()],
        initial="graded3",
        help_text="A starting point; every label can be edited afterwards.",
    )

    class Meta:
        model = Campaign
        fields = ["title", "slug", "description", "guidelines", "topic_breaks", "highlight_terms"]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "guidelines": forms.Textarea(attrs={"rows": 6}),
        }
        help_texts = {"slug": "Used in addresses and on the command line, e.g. covid-round1."}


class CampaignSettingsForm(forms.ModelForm):
    """What an organiser may change once the campaign runs (the slug is in every address and
    command, so it stays)."""

    class Meta:
        model = Campaign
        fields = [
            "title",
            "description",
            "guidelines",
            "topic_breaks",
            "highlight_terms",
            "reveal_models",
        ]
        widgets = CampaignForm.Meta.widgets


class LabelForm(forms.Form):
    value = forms.IntegerField(min_value=0, max_value=99)
    name = forms.CharField(max_length=100)
    key = forms.CharField(max_length=1, strip=False)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    example = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)

    def clean_key(self) -> str:
        key = self.cleaned_data["key"]
        if key in RESERVED_KEYS or not key.isprintable():
            raise forms.ValidationError(
                f"Choose a printable key other than {' '.join(sorted(RESERVED_KEYS - {' '}))} "
                "and space."
            )
        return key


class BaseLabelFormSet(forms.BaseFormSet):
    def clean(self) -> None:
        if any(self.errors):
            return
        problems = validate_scale(self.specs())
        if problems:
            raise forms.ValidationError(problems)

    def specs(self) -> list[LabelSpec]:
        specs = []
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or (self.can_delete and data.get("DELETE")):
                continue
            specs.append(
                LabelSpec(
                    value=data["value"],
                    name=data["name"].strip(),
                    description=data.get("description", "").strip(),
                    example=data.get("example", "").strip(),
                    key=data["key"],
                )
            )
        return sorted(specs, key=lambda spec: spec.value)


LabelFormSet = forms.formset_factory(
    LabelForm, formset=BaseLabelFormSet, extra=1, can_delete=True, max_num=12, validate_max=True
)


class RubricMetaForm(forms.Form):
    threshold = forms.IntegerField(
        label="Relevant from",
        help_text="The lowest label counted as relevant by binary measures and exports.",
    )
    note = forms.CharField(
        max_length=200, required=False, help_text="What changed, for the version history."
    )


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)]


CONFLICT_CHOICES = [
    ("refuse", "Refuse the file and list every conflict"),
    ("max", "Keep the highest label"),
    ("min", "Keep the lowest label"),
    ("first", "Keep the first occurrence"),
]


class ImportForm(forms.Form):
    """The upload form of one importer; which option fields it has depends on the importer."""

    def __init__(self, *args, importer, **kwargs):
        super().__init__(*args, **kwargs)
        self.importer = importer
        self.prefix = importer.kind
        self.fields["files"] = (MultipleFileField if importer.multiple else forms.FileField)(
            label="Files" if importer.multiple else "File",
            help_text=importer.help,
        )
        options = set(importer.options)
        if "format" in options:
            self.fields["format"] = forms.ChoiceField(
                choices=[("", "Guess from the content")]
                + [(f, f.upper()) for f in importer.formats],
                required=False,
            )
        if "positional_ids" in options:
            self.fields["positional_ids"] = forms.BooleanField(
                required=False,
                label="Number SMART topics 1..N by position (Cranfield's qrels use positions)",
            )
        if "only_pooled" in options:
            self.fields["only_pooled"] = forms.BooleanField(
                required=False, label="Keep only documents that are in a pool"
            )
        if "replace" in options:
            self.fields["replace"] = forms.BooleanField(
                required=False, label="Replace runs with the same tag"
            )
        if "split_tags" in options:
            self.fields["split_tags"] = forms.BooleanField(
                required=False, label="Split a file with several tags into several runs"
            )
        if "assessor" in options:
            self.fields["assessor"] = forms.CharField(
                max_length=150,
                label="Source of these judgments",
                help_text="A name for the origin, e.g. NIST-round1; not a login.",
            )
        if "kind" in options:
            self.fields["kind"] = forms.ChoiceField(
                choices=[
                    (Assessor.Kind.IMPORTED.value, "People (earlier qrels)"),
                    (Assessor.Kind.MODEL.value, "A model (an LLM judge)"),
                ],
                initial=Assessor.Kind.IMPORTED.value,
                required=False,  # absent: earlier qrels, as before the choice existed
                label="Who made these labels",
                help_text="A model's labels stay out of the qrels unless an export asks for "
                "them, are compared with people's apart, and are never shown to assessors.",
            )
        if "on_conflict" in options:
            self.fields["on_conflict"] = forms.ChoiceField(
                choices=CONFLICT_CHOICES,
                initial="refuse",
                label="When one pair has two different labels",
            )
        if "encoding" in options:
            self.fields["encoding"] = forms.CharField(
                required=False, max_length=40, help_text="Leave empty for UTF-8."
            )

    def clean_encoding(self) -> str:
        import codecs

        encoding = self.cleaned_data.get("encoding", "").strip()
        if encoding:
            try:
                codecs.lookup(encoding)
            except LookupError:
                raise forms.ValidationError(f"{encoding!r} is not a known text encoding.") from None
        return encoding

    def files_list(self) -> list:
        files = self.cleaned_data["files"]
        return files if isinstance(files, list) else [files]

    def options(self) -> dict:
        return {key: value for key, value in self.cleaned_data.items() if key != "files"}
