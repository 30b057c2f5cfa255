from django import forms


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. laptop")
    expires_in_days = forms.FloatField(
        required=False,
        min_value=0.001,
        max_value=3650,
        label="Expires in (days)",
        help_text="Empty: never",
    )
    read_only = forms.BooleanField(required=False, help_text="Only reads; no launch or destroy")
