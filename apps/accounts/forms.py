from django import forms


class SSHKeyForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        help_text="What the key is for, e.g. laptop (empty: the key's comment)",
    )
    public_key = forms.CharField(
        label="Public key",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "autocomplete": "off"}),
        help_text="The one line of your id_ed25519.pub (or id_ecdsa.pub, id_rsa.pub), "
        "never the private key",
    )
