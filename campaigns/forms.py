from __future__ import annotations

from django import forms

from campaigns.models import RESERVED_KEYS, Campaign, LabelSpec, validate_scale
from campaigns.scales import SCALES


class CampaignForm(forms.ModelForm):
    scale = forms.ChoiceField(
        choices=[(name, scale.title) for name, scale in SCALES.items()],
        initial="graded3",
        help_text="A starting point; every label can be edited afterwards.",
    )

    class Meta:
        model = Campaign
        fields = ["title", "slug", "description", "guidelines"]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "guidelines": forms.Textarea(attrs={"rows": 6}),
        }
        help_texts = {"slug": "Used in addresses and on the command line, e.g. covid-round1."}


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
